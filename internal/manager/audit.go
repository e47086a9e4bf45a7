package manager

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"

	"corral/internal/agentapi"
	"corral/internal/audit"
)

// auditedEvents maps the sandbox events the audit trail keeps to the
// trail's kinds: lifecycle moves, what the sandbox's network did or was
// refused, and changes made to it. Events that only narrate the daemon's
// own work (reconnects, log rotation) stay in the event log alone.
var auditedEvents = map[string]string{
	"running":         "create",
	"terminated":      "terminate",
	"failed":          "failed",
	"paused":          "pause",
	"resumed":         "resume",
	"snapshot":        "snapshot",
	"fork":            "fork",
	"updated":         "update",
	"network_policy":  "network_policy",
	"egress_allowed":  "egress_allowed",
	"egress_denied":   "egress_denied",
	"limit_reached":   "limit_reached",
	"port_connection": "port_connection",
	"timeout":         "timeout",
	"idle_timeout":    "idle_timeout",
	"oom":             "oom",
	"crashed":         "crashed",
}

// auditEvent is the handles' audit hook (handle.Host.Audit). The event's
// message stays in the event log: a failure's can name host paths, which
// the trail, exported and verified as it is stored, must not hold.
func (m *Manager) auditEvent(ctx context.Context, id, kind, _ string, fields map[string]string) {
	ak, ok := auditedEvents[kind]
	if !ok {
		return
	}
	f := make(map[string]string, len(fields)+3)
	for k, v := range fields {
		f[k] = v
	}
	switch ak {
	case "create":
		if h := m.lookup(id); h != nil {
			rec := h.Record()
			f["image"], f["runtime"] = rec.Spec.Image, rec.Spec.Runtime
			if rec.Spec.Name != "" {
				f["name"] = rec.Spec.Name
			}
		}
	}
	caller := audit.CallerFrom(ctx)
	if ak == "terminate" || ak == "failed" {
		if c, ok := m.enders.LoadAndDelete(id); ok && caller == "" {
			caller = c.(string)
		}
	}
	m.cfg.Audit.Record(ak, id, caller, f)
}

// noteEnder remembers who asked for sandbox id's end: the terminate
// event is written under the teardown's own context, which no longer
// names the caller.
func (m *Manager) noteEnder(ctx context.Context, id string) {
	if c := audit.CallerFrom(ctx); c != "" && m.cfg.Audit != nil {
		m.enders.Store(id, c)
	}
}

// auditExec returns what records an exec in the trail once its end is
// seen (code not nil) or its stream is closed before (code nil: the
// caller went away; the process may still run); nil when the trail is
// off. Env values are never recorded.
func (m *Manager) auditExec(ctx context.Context, id string, req agentapi.StartRequest) func(*agentapi.Event) {
	if m.cfg.Audit == nil {
		return nil
	}
	caller, start := audit.CallerFrom(ctx), time.Now()
	argv, _ := json.Marshal(req.Args)
	var once sync.Once
	return func(end *agentapi.Event) {
		once.Do(func() {
			f := map[string]string{"argv": string(argv), "user": req.User, "cwd": req.Cwd,
				"duration_ms": strconv.FormatInt(time.Since(start).Milliseconds(), 10)}
			if req.Tag != "" {
				f["tag"] = req.Tag
			}
			if end == nil {
				f["ended"] = "false"
			} else {
				f["exit_code"] = strconv.Itoa(end.ExitCode)
				if end.Signal != "" {
					f["signal"] = end.Signal
				}
				if end.TimedOut {
					f["timed_out"] = "true"
				}
				if end.Error != "" {
					f["error"] = end.Error
				}
			}
			m.cfg.Audit.Record("exec", id, caller, f)
		})
	}
}

// auditWrite reads r through a digest when the trail is on, and returns
// what records the write once it is done.
func (m *Manager) auditWrite(ctx context.Context, id, path string, r io.Reader) (io.Reader, func(error)) {
	if m.cfg.Audit == nil {
		return r, func(error) {}
	}
	d := audit.NewDigest(r)
	return d, func(err error) {
		f := d.Fields()
		f["path"] = path
		auditResult(f, err)
		m.cfg.Audit.Record("file_write", id, audit.CallerFrom(ctx), f)
	}
}

// auditFile records a file operation other than a write.
func (m *Manager) auditFile(ctx context.Context, id, kind string, f map[string]string, err error) {
	if m.cfg.Audit == nil {
		return
	}
	auditResult(f, err)
	m.cfg.Audit.Record(kind, id, audit.CallerFrom(ctx), f)
}

func auditResult(f map[string]string, err error) {
	f["result"] = "ok"
	if err != nil {
		f["result"] = "error"
	}
}
