package api

import (
	"net/http"
	"time"

	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/usage"
	"corral/pkg/apiv1"
)

// usageReport is GET /v1/usage?from=&to=&group_by=: the usage of the
// sandboxes that ran in the window (from: default 24 hours ago; to:
// default now), grouped by sandbox, runtime or tag:KEY.
func (s *Server) usageReport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, err := timeParam("from", q.Get("from"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	if q.Get("from") == "" {
		from = time.Now().Add(-24 * time.Hour)
	}
	to, err := timeParam("to", q.Get("to"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	by := q.Get("group_by")
	groups, err := s.m.UsageReport(r.Context(), from, to, by)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.UsageReport{From: from.UTC(), GroupBy: by, Groups: []apiv1.UsageGroup{}}
	if !to.IsZero() {
		t := to.UTC()
		out.To = &t
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, apiv1.UsageGroup{Key: g.Key, Sandboxes: g.Sandboxes, Usage: toAPIUsage(g.Totals)})
	}
	writeJSON(w, http.StatusOK, out)
}

// sandboxUsage is GET /v1/sandboxes/{id}/usage: its usage so far, or
// settled at its end.
func (s *Server) sandboxUsage(w http.ResponseWriter, r *http.Request) {
	u, err := s.m.UsageOf(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPISandboxUsage(u))
}

// timeParam reads an optional time parameter (sinceParam's forms, with
// the parameter's own name in errors).
func timeParam(name, v string) (time.Time, error) {
	t, err := sinceParam(v)
	if err != nil {
		return t, errdefs.Invalid(name, "an RFC 3339 time or Unix seconds, got %q", v)
	}
	return t, nil
}

func toAPISandboxUsage(u manager.SandboxUsage) apiv1.SandboxUsage {
	out := apiv1.SandboxUsage{SandboxID: u.SandboxID, Runtime: u.Runtime, Tags: u.Tags, StartedAt: u.StartedAt.UTC(),
		Live: u.Live, Usage: toAPIUsage(u.Totals)}
	if !u.EndedAt.IsZero() {
		t := u.EndedAt.UTC()
		out.EndedAt = &t
	}
	return out
}

func toAPIUsage(t usage.Totals) apiv1.Usage {
	return apiv1.Usage(t)
}
