package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"corral/internal/audit"
	"corral/internal/e2b"
	"corral/internal/records"
	"corral/internal/sandboxlog"
)

// DefaultAuditRetention is how long the audit trail keeps an entry
// unless --audit-retention says otherwise.
const DefaultAuditRetention = 90 * 24 * time.Hour

// openAudit opens the audit trail, or returns nil when it is off.
func openAudit(ctx context.Context, cfg Config, st *records.Store, log *slog.Logger) (*audit.Trail, error) {
	if cfg.AuditOff {
		log.Info("the audit trail is off", "op", "audit")
		return nil, nil
	}
	if cfg.AuditRetention < 0 {
		return nil, fmt.Errorf("--audit-retention %s: must be 0 (keep forever) or more", cfg.AuditRetention)
	}
	return audit.Open(ctx, audit.Config{Store: st, Retention: cfg.AuditRetention, Log: log})
}

// calls is the audit trail (nil: off) and the writer that records API
// calls naming a sandbox within its budget.
type calls struct {
	trail *audit.Trail
	w     *sandboxlog.Writer
}

// recorder is where API calls are recorded: nil when the trail is off.
func (c calls) recorder() audit.Recorder {
	if c.trail == nil {
		return nil
	}
	return c.w
}

// e2bAudited records the E2B control API's changing calls, by the holder
// of the daemon token its key carries (the same caller as on the native
// API).
func e2bAudited(rec audit.Recorder, h http.Handler) http.Handler {
	caller := func(r *http.Request) string {
		key := r.Header.Get("X-API-KEY")
		if tok, ok := strings.CutPrefix(key, e2b.KeyPrefix); ok {
			key = tok
		}
		return audit.TokenCaller(key)
	}
	sandbox := func(r *http.Request) string {
		_, rest, ok := strings.Cut(r.URL.Path, "/sandboxes/")
		if !ok {
			return ""
		}
		id, _, _ := strings.Cut(rest, "/")
		return id
	}
	return audit.Calls(rec, "e2b", h, caller, sandbox)
}

// envdAudited names the envd face's caller (the holder of a sandbox's
// access token) in what the manager records for it; its calls are all
// POSTs, reads included, so they are not recorded as API calls themselves.
func envdAudited(t *audit.Trail, h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller := "envd:" + audit.TokenCaller(r.Header.Get("X-Access-Token"))
		h.ServeHTTP(w, r.WithContext(audit.WithCaller(r.Context(), caller)))
	})
}
