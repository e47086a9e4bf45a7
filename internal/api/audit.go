package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/internal/audit"
	"corral/internal/errdefs"
	"corral/internal/websession"
	"corral/pkg/apiv1"
)

// SetAudit makes the server serve /v1/audit from t and record its
// changing calls through rec (the sandbox trail's writer, which charges a
// call naming a sandbox to that sandbox's budget); call it before serving.
// Without it (or with a nil t) the trail is off and /v1/audit answers
// failed_precondition.
func (s *Server) SetAudit(t *audit.Trail, rec audit.Recorder) {
	s.trail, s.recorder = t, rec
	if t == nil {
		s.recorder = nil
	}
}

// audited records the route's call in the trail (audit.Trail.Calls), by
// the holder of the bearer token, for the sandbox the route names.
func (s *Server) audited(next http.HandlerFunc) http.HandlerFunc {
	caller := func(r *http.Request) string {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if tok == "" && s.sessions != nil && websession.HasCookie(r) && s.sessions.Check(r) == nil {
			return audit.TokenCaller(s.token) + " (console)"
		}
		return audit.TokenCaller(tok)
	}
	sandbox := func(r *http.Request) string { return r.PathValue("id") }
	return func(w http.ResponseWriter, r *http.Request) {
		if s.recorder == nil {
			next(w, r)
			return
		}
		audit.Calls(s.recorder, "api", next, caller, sandbox).ServeHTTP(w, r)
	}
}

func (s *Server) trailOn() error {
	if s.trail == nil {
		return fmt.Errorf("%w: the audit trail is off (corral serve --audit=false)", errdefs.ErrFailedPrecondition)
	}
	return nil
}

// auditFilter reads GET /v1/audit's query: sandbox (id or name), since
// (RFC 3339 or a duration back from now), kind (repeated or
// comma-separated), after (a seq) and limit.
func (s *Server) auditFilter(r *http.Request) (audit.Filter, error) {
	q := r.URL.Query()
	f := audit.Filter{Limit: 100}
	if v := q.Get("sandbox"); v != "" {
		id, err := s.m.Resolve(r.Context(), v)
		if err != nil {
			return f, err
		}
		f.SandboxID = id
	}
	if v := q.Get("since"); v != "" {
		t, err := parseSince(v)
		if err != nil {
			return f, err
		}
		f.Since = t
	}
	for _, v := range q["kind"] {
		for _, k := range strings.Split(v, ",") {
			if !slices.Contains(audit.Kinds, k) {
				return f, errdefs.Invalid("kind", "unknown kind %q (one of %s)", truncate(k), strings.Join(audit.Kinds, ", "))
			}
			f.Kinds = append(f.Kinds, k)
		}
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, errdefs.Invalid("after", "must be a sequence number (0 or more), got %q", truncate(v))
		}
		f.After = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxPage {
			return f, errdefs.Invalid("limit", "must be 1 to %d, got %q", audit.MaxPage, truncate(v))
		}
		f.Limit = n
	}
	return f, nil
}

func parseSince(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, errdefs.Invalid("since", "must be an RFC 3339 time or a positive duration (24h), got %q", truncate(v))
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// getAudit is GET /v1/audit: a page of the trail, oldest first.
func (s *Server) getAudit(w http.ResponseWriter, r *http.Request) {
	if err := s.trailOn(); err != nil {
		s.writeError(w, err)
		return
	}
	f, err := s.auditFilter(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	es, err := s.trail.Query(r.Context(), f)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.AuditPage{Entries: make([]apiv1.AuditEntry, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, apiv1.AuditEntry(e))
	}
	if len(es) == f.Limit {
		out.Next = strconv.FormatInt(es[len(es)-1].Seq, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// exportAudit is GET /v1/audit/export: the entries the query selects
// (limit aside), as JSON lines, each exactly as stored and hashed.
func (s *Server) exportAudit(w http.ResponseWriter, r *http.Request) {
	if err := s.trailOn(); err != nil {
		s.writeError(w, err)
		return
	}
	f, err := s.auditFilter(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	f.Limit = audit.MaxPage
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for {
		es, err := s.trail.Query(r.Context(), f)
		if err != nil {
			// The status is sent; a cut stream is all the caller can see.
			s.log.Warn("exporting the audit trail", "op", "audit", "err", err)
			return
		}
		for _, e := range es {
			if enc.Encode(apiv1.AuditEntry(e)) != nil {
				return
			}
			f.After = e.Seq
		}
		if len(es) < f.Limit {
			return
		}
	}
}

// verifyAudit is GET /v1/audit/verify: the whole trail walked.
func (s *Server) verifyAudit(w http.ResponseWriter, r *http.Request) {
	if err := s.trailOn(); err != nil {
		s.writeError(w, err)
		return
	}
	rep, err := s.trail.Verify(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.AuditReport{OK: rep.Broken == nil, Entries: rep.Entries, Head: rep.Head}
	if b := rep.Broken; b != nil {
		out.Broken = &apiv1.AuditBreak{Seq: b.Seq, Problem: b.Problem, Detail: b.Detail}
	}
	writeJSON(w, http.StatusOK, out)
}
