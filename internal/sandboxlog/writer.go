package sandboxlog

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"corral/internal/audit"
	"corral/internal/netpolicy/policy"
	"corral/internal/records"
)

// Config configures a Writer.
type Config struct {
	Records *records.Store
	// Trail is the audit trail; nil when it is off.
	Trail *audit.Trail
	Log   *slog.Logger
	// Protected, if set, names destinations beyond policy.AlwaysDenied
	// whose denials are evidence (the host's own addresses and networks).
	Protected func(netip.Addr) bool
	// Logs, if set, is the log lines' budget; the writer tells its
	// held-back lines as it tells its folds.
	Logs *LogBudget
	// now is the clock (tests).
	now func() time.Time
}

// maxPendingDecisions bounds the decisions waiting to be written.
const maxPendingDecisions = 4096

// Writer writes what sandboxes make the host keep, within each sandbox's
// budget. Its methods never fail: a write that fails is logged.
type Writer struct {
	cfg       Config
	log       *slog.Logger
	budget    *budget
	decisions chan record
	enders    sync.Map // sandbox id -> the caller who asked for its end
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// Open starts a writer; Close stops it.
func Open(cfg Config) *Writer {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	w := &Writer{cfg: cfg, log: cfg.Log, budget: newBudget(), decisions: make(chan record, maxPendingDecisions),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// record is one thing to keep: an event (event set) and its audit entry
// (auditKind set), or an audit entry alone.
type record struct {
	id, kind, msg string
	fields        map[string]string
	event         bool
	committed     bool // the event is already stored (with its record)
	capped        bool // within its bounds already (Cap's, or a fold report's own)
	auditKind     string
	caller        string
	class         class
	key           string // what it is folded under
}

// Event records an ordinary event of sandbox id (and its audit entry, for
// the kinds the trail keeps), within the budget.
func (w *Writer) Event(ctx context.Context, id, kind, msg string, fields map[string]string) {
	r := record{id: id, kind: kind, msg: msg, fields: fields, event: true, key: eventKey(kind, fields)}
	if kind == "limit_reached" {
		// A bound that refused the sandbox (its callers report one a
		// second at most) is evidence: a flood of ordinary records
		// before it must not fold it away.
		r.class = evidence
	}
	w.write(ctx, r)
}

// Milestone records a state move of sandbox id (paused, crashed, timed
// out...): written whatever the budget holds, and charged to it.
func (w *Writer) Milestone(ctx context.Context, id, kind, msg string, fields map[string]string) {
	w.write(ctx, record{id: id, kind: kind, msg: msg, fields: fields, event: true, class: milestone})
}

// Committed records the audit entry of a milestone event already stored
// with the sandbox's record (fields as Cap returned them), and charges it.
func (w *Writer) Committed(ctx context.Context, id, kind, msg string, fields map[string]string) {
	w.write(ctx, record{id: id, kind: kind, msg: msg, fields: fields, event: true, committed: true, capped: true, class: milestone})
}

// Audit records an audit entry of what a caller did inside sandbox id (an
// exec, a file written or removed), within the budget; the caller is the
// one ctx names.
func (w *Writer) Audit(ctx context.Context, kind, id string, fields map[string]string) {
	caller := audit.CallerFrom(ctx)
	w.write(ctx, record{id: id, kind: kind, fields: fields, auditKind: kind, caller: caller, key: auditKey(kind, caller, fields)})
}

// Record is audit.Recorder: an API call's entry. One naming a sandbox is
// charged to it; one naming none goes to the trail as it is.
func (w *Writer) Record(kind, id, caller string, fields map[string]string) {
	if id == "" {
		w.cfg.Trail.Record(kind, "", caller, capFields(fields))
		return
	}
	w.write(context.Background(), record{id: id, kind: kind, fields: fields, auditKind: kind, caller: caller, key: auditKey(kind, caller, fields)})
}

// Ender remembers who asked for sandbox id's end: its terminate entry is
// written under the teardown's own context, which no longer names them.
func (w *Writer) Ender(ctx context.Context, id string) {
	if c := audit.CallerFrom(ctx); c != "" {
		w.enders.Store(id, c)
	}
}

// Decision records a network decision. It never blocks the packet path
// and never loses a decision: one past the budget, or met by a full
// queue, is folded.
func (w *Writer) Decision(d policy.Decision) {
	r := decisionRecord(d, w.cfg.Protected)
	now := w.cfg.now()
	if !w.budget.take(r.id, r.class, now) {
		w.budget.fold(r.id, r.kind, r.key, r.class == evidence, now)
		return
	}
	select {
	case w.decisions <- r:
	default:
		w.budget.fold(r.id, r.kind, r.key, r.class == evidence, now)
	}
}

// write charges r to its sandbox and writes it, or folds it.
func (w *Writer) write(ctx context.Context, r record) {
	now := w.cfg.now()
	if !w.budget.take(r.id, r.class, now) {
		w.budget.fold(r.id, r.kind, r.key, r.class == evidence, now)
		return
	}
	w.store(ctx, r)
}

// store writes r as it is (its budget is settled).
func (w *Writer) store(ctx context.Context, r record) {
	msg, fields := r.msg, r.fields
	if !r.capped {
		msg, fields = capRecord(msg, fields)
	}
	if r.event && !r.committed {
		ev := records.Event{SandboxID: r.id, Kind: r.kind, Message: msg, Fields: fields}
		if err := w.cfg.Records.AppendEvent(context.WithoutCancel(ctx), ev); err != nil {
			w.log.Warn("appending event", "sandbox", r.id, "kind", r.kind, "err", err)
		}
	}
	if w.cfg.Trail == nil {
		return
	}
	kind := r.auditKind
	if kind == "" {
		kind = auditedEvents[r.kind]
	}
	if kind == "" {
		return
	}
	caller := r.caller
	if caller == "" {
		caller = audit.CallerFrom(ctx)
	}
	if kind == "terminate" || kind == "failed" {
		if c, ok := w.enders.LoadAndDelete(r.id); ok && caller == "" {
			caller = c.(string)
		}
	}
	w.cfg.Trail.Record(kind, r.id, caller, cloneFields(fields))
}

// Cap returns an event's message and fields within the caps, for a
// milestone stored with its sandbox's record (then given to Committed).
func Cap(msg string, fields map[string]string) (string, map[string]string) {
	return capRecord(msg, fields)
}

func cloneFields(f map[string]string) map[string]string {
	out := make(map[string]string, len(f))
	for k, v := range f {
		out[k] = v
	}
	return out
}

// run writes the queued decisions and, each second, the folds of the
// windows that ended and the log lines held back.
func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			w.flush()
			return
		case <-tick.C:
			w.writeFolds(w.cfg.now(), false)
		case r := <-w.decisions:
			w.store(context.Background(), r)
		}
	}
}

// flush writes, as the daemon stops, the decisions still queued and every
// window's folds, ended or not: nothing counted is lost.
func (w *Writer) flush() {
	for {
		select {
		case r := <-w.decisions:
			w.store(context.Background(), r)
		default:
			w.writeFolds(w.cfg.now(), true)
			return
		}
	}
}

// writeFolds writes the limit_reached events of the fold windows ended by
// now (every one, when all is set).
func (w *Writer) writeFolds(now time.Time, all bool) {
	for _, r := range w.budget.due(now, all) {
		msg, f := r.event()
		w.store(context.Background(), record{id: r.sandbox, kind: "limit_reached", msg: msg, fields: f, event: true, capped: true, class: milestone})
	}
	if w.cfg.Logs != nil {
		w.cfg.Logs.tell(now, all)
	}
}

// Close writes what is queued and counted, and stops the writer.
func (w *Writer) Close() {
	w.closeOnce.Do(func() { close(w.stop) })
	<-w.done
}

// auditKey is what an audit-only record is folded under: its kind, its
// caller and, for an exec, the program.
func auditKey(kind, caller string, fields map[string]string) string {
	key := kind + " by " + caller
	switch kind {
	case "exec":
		var argv []string
		if json.Unmarshal([]byte(fields["argv"]), &argv) == nil && len(argv) > 0 {
			key += " " + cut(argv[0], 48)
		}
	case "api":
		key += " " + fields["method"]
	}
	return key
}

// eventKey is what an ordinary event is folded under: its kind and, for a
// connection to an exposed port, the port.
func eventKey(kind string, fields map[string]string) string {
	switch kind {
	case "port_connection":
		key := kind + " :" + fields["port"]
		if fields["error"] != "" {
			key += " (failed)"
		}
		return key
	case "limit_reached":
		return kind + " " + fields["resource"] + " " + fields["limit"]
	case "egress_injected", "egress_inject_skipped", "egress_inject_refused":
		return kind + " " + cut(fields["host"], maxFoldDest)
	}
	return kind
}
