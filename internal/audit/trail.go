package audit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"corral/internal/records"
)

// Config configures a Trail.
type Config struct {
	Store *records.Store
	// Retention is how long entries are kept; zero keeps them forever.
	Retention time.Duration
	// PruneEvery is the time between prunes (default an hour).
	PruneEvery time.Duration
	Log        *slog.Logger
}

// Trail appends entries to the audit trail. Record hands an entry to one
// writer goroutine, which links it to the chain and commits it with
// whatever else is queued, in one transaction. A nil *Trail records
// nothing (the trail is off).
type Trail struct {
	st       *records.Store
	cfg      Config
	log      *slog.Logger
	in       chan item
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	// head is the newest entry written; only the writer goroutine
	// touches it after Open.
	head *Entry
	// lost counts entries a failed write dropped; the next write records
	// the count (kind lost) so the gap shows in the trail.
	lost int64
}

// item is an entry to write, or (entry nil) a flush: flushed is closed
// once everything queued before it is committed.
type item struct {
	entry   *Entry
	flushed chan struct{}
	// pruneBefore, when set, prunes the entries older than it.
	pruneBefore time.Time
}

const queueLen = 4096

// Open starts the trail's writer after the newest entry in cfg.Store.
func Open(ctx context.Context, cfg Config) (*Trail, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = time.Hour
	}
	t := &Trail{st: cfg.Store, cfg: cfg, log: cfg.Log, in: make(chan item, queueLen), stop: make(chan struct{}), done: make(chan struct{})}
	last, ok, err := cfg.Store.LastAudit(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening the audit trail: %w", err)
	}
	if ok {
		t.head = &last
	}
	go t.run()
	return t, nil
}

// Record appends an entry (its time is now). It blocks only while the
// writer is a full queue behind; it never drops an entry silently.
func (t *Trail) Record(kind, sandboxID, caller string, fields map[string]string) {
	if t == nil {
		return
	}
	e := &Entry{Time: time.Now().UTC(), Kind: kind, SandboxID: sandboxID, Caller: caller, Fields: fields}
	select {
	case t.in <- item{entry: e}:
	case <-t.done:
		t.log.Warn("audit entry after the trail closed", "kind", kind, "sandbox", sandboxID)
	}
}

// Flush returns once every entry recorded before it is committed.
func (t *Trail) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	ch := make(chan struct{})
	select {
	case t.in <- item{flushed: ch}:
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Prune deletes the entries older than before now, as the retention
// would, and returns once it is done.
func (t *Trail) Prune(ctx context.Context, before time.Time) error {
	ch := make(chan struct{})
	select {
	case t.in <- item{pruneBefore: before, flushed: ch}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is queued and stops the writer.
func (t *Trail) Close() {
	if t == nil {
		return
	}
	t.stopOnce.Do(func() { close(t.stop) })
	<-t.done
}

func (t *Trail) run() {
	defer close(t.done)
	tick := time.NewTicker(t.cfg.PruneEvery)
	defer tick.Stop()
	t.prune()
	for {
		select {
		case it := <-t.in:
			t.write(t.batch(it))
		case <-tick.C:
			t.prune()
		case <-t.stop:
			for {
				select {
				case it := <-t.in:
					t.write(t.batch(it))
				default:
					return
				}
			}
		}
	}
}

// groupWindow is how long the writer gathers entries after the first
// before it commits them: one commit (and fsync) for a burst of calls
// instead of one per call, so the trail keeps off the exec path's CPU
// and disk. A flush or prune is answered without waiting for it.
const groupWindow = 50 * time.Millisecond

// batch is it and what else comes within groupWindow, up to a bound.
func (t *Trail) batch(it item) []item {
	b := []item{it}
	if it.entry == nil {
		return t.drain(b)
	}
	timer := time.NewTimer(groupWindow)
	defer timer.Stop()
	for len(b) < 512 {
		select {
		case more := <-t.in:
			b = append(b, more)
			if more.entry == nil {
				return t.drain(b)
			}
		case <-timer.C:
			return b
		case <-t.stop:
			return t.drain(b)
		}
	}
	return b
}

// drain adds to b whatever is queued now, up to the bound.
func (t *Trail) drain(b []item) []item {
	for len(b) < 512 {
		select {
		case more := <-t.in:
			b = append(b, more)
		default:
			return b
		}
	}
	return b
}

// write links the batch's entries to the chain and commits them; flushes
// are answered after the commit.
func (t *Trail) write(b []item) {
	var entries []Entry
	head := t.head
	if t.lost > 0 {
		b = append([]item{{entry: &Entry{Time: time.Now().UTC(), Kind: "lost",
			Fields: map[string]string{"entries": strconv.FormatInt(t.lost, 10)}}}}, b...)
	}
	for _, it := range b {
		if it.entry == nil {
			continue
		}
		e := *it.entry
		link(head, &e)
		entries = append(entries, e)
		head = &entries[len(entries)-1]
	}
	if len(entries) > 0 {
		if err := t.st.AppendAudit(context.Background(), entries); err != nil {
			t.lost += int64(len(entries))
			t.log.Error("writing the audit trail: entries lost", "entries", len(entries), "err", err)
		} else {
			t.lost = 0
			h := entries[len(entries)-1]
			t.head = &h
		}
	}
	for _, it := range b {
		if !it.pruneBefore.IsZero() {
			t.pruneBefore(it.pruneBefore)
		}
		if it.flushed != nil {
			close(it.flushed)
		}
	}
}

// prune deletes the entries older than the retention, appending the
// checkpoint that keeps the rest verifiable.
func (t *Trail) prune() {
	if t.cfg.Retention > 0 {
		t.pruneBefore(time.Now().Add(-t.cfg.Retention))
	}
}

// pruneBefore deletes the entries older than before and appends their
// checkpoint.
func (t *Trail) pruneBefore(before time.Time) {
	if t.head == nil {
		return
	}
	ctx := context.Background()
	through, err := t.st.AuditSeqBefore(ctx, before)
	if err != nil || through == 0 {
		if err != nil {
			t.log.Warn("pruning the audit trail", "err", err)
		}
		return
	}
	n, err := t.pruneThrough(ctx, through)
	if err != nil {
		t.log.Warn("pruning the audit trail", "err", err)
		return
	}
	t.log.Info("audit trail pruned", "op", "audit", "entries", n, "through", through)
}

// pruneThrough deletes the entries up to seq through and appends their
// checkpoint.
func (t *Trail) pruneThrough(ctx context.Context, through int64) (int64, error) {
	rows, err := t.st.QueryAudit(ctx, records.AuditFilter{After: through - 1, Limit: 1}, false)
	if err != nil {
		return 0, err
	}
	if len(rows) == 0 || rows[0].Seq != through {
		return 0, fmt.Errorf("audit entry %d is missing", through)
	}
	cp := checkpoint(rows[0], 0)
	var oldest int64 = 1
	if first, err := t.st.QueryAudit(ctx, records.AuditFilter{Limit: 1}, false); err == nil && len(first) > 0 {
		oldest = first[0].Seq
	}
	cp.Fields["pruned"] = strconv.FormatInt(through-oldest+1, 10)
	cp.Time = time.Now().UTC()
	link(t.head, &cp)
	n, err := t.st.PruneAudit(ctx, through, cp)
	if err != nil {
		return 0, err
	}
	t.head = &cp
	return n, nil
}
