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

// noteEnder remembers who asked for sandbox id's end: the terminate
// event is written under the teardown's own context, which no longer
// names the caller.
func (m *Manager) noteEnder(ctx context.Context, id string) {
	if m.cfg.Audit != nil {
		m.trail.Ender(ctx, id)
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
	start := time.Now()
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
			m.trail.Audit(ctx, "exec", id, f)
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
		m.trail.Audit(ctx, "file_write", id, f)
	}
}

// auditFile records a file operation other than a write.
func (m *Manager) auditFile(ctx context.Context, id, kind string, f map[string]string, err error) {
	if m.cfg.Audit == nil {
		return
	}
	auditResult(f, err)
	m.trail.Audit(ctx, kind, id, f)
}

func auditResult(f map[string]string, err error) {
	f["result"] = "ok"
	if err != nil {
		f["result"] = "error"
	}
}
