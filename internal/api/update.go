package api

import (
	"net/http"
	"strconv"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// updateSandbox is PATCH /v1/sandboxes/{id}: a new lifetime (from now)
// and a merge patch of the tags.
func (s *Server) updateSandbox(w http.ResponseWriter, r *http.Request) {
	var req apiv1.UpdateSandboxRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	u := manager.Update{ExtendOnly: req.ExtendOnly, Tags: req.Tags}
	if req.Timeout != nil {
		d, err := seconds("timeout", *req.Timeout, sandbox.MaxTimeout)
		if err != nil {
			s.writeError(w, err)
			return
		}
		u.Timeout = &d
	}
	sb, err := s.m.Update(r.Context(), r.PathValue("id"), u)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toAPI(sb))
}

// byName lets next take a sandbox's name wherever its route takes {id}:
// the name becomes the id before next runs (an id passes through as it
// is), and an unknown name is a 404 naming it.
func (s *Server) byName(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := s.m.Resolve(r.Context(), r.PathValue("id"))
		if err != nil {
			s.writeError(w, err)
			return
		}
		r.SetPathValue("id", id)
		next(w, r)
	}
}

// listOptions reads GET /v1/sandboxes's query: state (repeated or
// comma-separated), tag (repeated, k=v or k), limit and next.
func listOptions(r *http.Request) (manager.ListOptions, error) {
	q := r.URL.Query()
	var o manager.ListOptions
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if !sandbox.State(st).Valid() {
				return o, errdefs.Invalid("state", "unknown state %q", st)
			}
			o.States = append(o.States, sandbox.State(st))
		}
	}
	if tags := q["tag"]; len(tags) > 0 {
		if len(tags) > 64 {
			return o, errdefs.Invalid("tag", "at most 64 tag filters")
		}
		o.Tags = map[string]string{}
		for _, t := range tags {
			k, v, _ := strings.Cut(t, "=")
			if !sandbox.ValidTagKey(k) || len(v) > 256 {
				return o, errdefs.Invalid("tag", "%q is not a tag filter (key=value, or key for any value)", t)
			}
			o.Tags[k] = v
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > manager.MaxListLimit {
			return o, errdefs.Invalid("limit", "must be between 1 and %d, got %q", manager.MaxListLimit, l)
		}
		o.Limit = n
	}
	o.Next = q.Get("next")
	return o, nil
}
