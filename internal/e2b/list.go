package e2b

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/sandbox"
)

// Bounds of a list page (E2B's: 100 by default).
const (
	defaultListLimit = 100
	maxListLimit     = manager.MaxListLimit
)

// listV2 is GET /v2/sandboxes: a page of running and paused sandboxes
// (query state narrows it), filtered by metadata, the next page's token in
// X-Next-Token and the count of running ones matching the filters in
// X-Total-Running (list_total.go).
func (s *Server) listV2(w http.ResponseWriter, r *http.Request) {
	o, err := listQuery(r.URL.Query(), true)
	if err != nil {
		s.writeError(w, err)
		return
	}
	page, next, err := s.m.ListPage(r.Context(), o)
	if err != nil {
		s.writeError(w, err)
		return
	}
	total, err := s.totalRunning(r.Context(), o)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	if total != "" {
		w.Header().Set("X-Total-Running", total)
	}
	out := []listedSandbox{}
	for _, sb := range page {
		out = append(out, listed(sb))
	}
	writeJSON(w, http.StatusOK, out)
}

// listV1 is GET /sandboxes: every running sandbox, filtered by metadata.
func (s *Server) listV1(w http.ResponseWriter, r *http.Request) {
	o, err := listQuery(r.URL.Query(), false)
	if err != nil {
		s.writeError(w, err)
		return
	}
	o.States, o.Limit = []sandbox.State{sandbox.Running}, maxListLimit
	out := []listedSandbox{}
	for {
		page, next, err := s.m.ListPage(r.Context(), o)
		if err != nil {
			s.writeError(w, err)
			return
		}
		for _, sb := range page {
			out = append(out, listed(sb))
		}
		if next == "" {
			break
		}
		o.Next = next
	}
	writeJSON(w, http.StatusOK, out)
}

// listQuery reads a list's query: metadata (k=v pairs, URL-encoded as
// one parameter), and with paging, state, limit, nextToken, order
// (asc or desc: E2B's default is newest first), startedAfter (RFC 3339)
// and template. Anything else is refused by name.
func listQuery(q url.Values, paging bool) (manager.ListOptions, error) {
	o := manager.ListOptions{States: []sandbox.State{sandbox.Running, sandbox.Paused}, Desc: true, OriginTag: templateTag}
	known := map[string]bool{"metadata": true}
	if paging {
		for _, k := range []string{"state", "limit", "nextToken", "order", "startedAfter", "template"} {
			known[k] = true
		}
	}
	for k := range q {
		if !known[k] {
			return o, errdefs.Invalid(k, "is not a list filter Corral supports")
		}
	}
	if err := listOrderAndFilters(q, &o); err != nil {
		return o, err
	}
	tags, err := metadataFilter(q.Get("metadata"))
	if err != nil {
		return o, err
	}
	o.Tags = tags
	if !paging {
		return o, nil
	}
	if sts := q["state"]; len(sts) > 0 {
		o.States = nil
		for _, v := range sts {
			for _, st := range strings.Split(v, ",") {
				switch st {
				case "running":
					o.States = append(o.States, sandbox.Running, sandbox.Creating)
				case "paused":
					o.States = append(o.States, sandbox.Paused)
				default:
					return o, errdefs.Invalid("state", "must be running or paused, got %q", truncate(st))
				}
			}
		}
	}
	o.Limit = defaultListLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			return o, errdefs.Invalid("limit", "must be between 1 and %d, got %q", maxListLimit, truncate(l))
		}
		o.Limit = n
	}
	o.Next = q.Get("nextToken")
	if len(o.Next) > 256 {
		return o, errdefs.Invalid("nextToken", "is not a token this API gave")
	}
	return o, nil
}

// metadataFilter parses the metadata filter: "k1=v1&k2=v2", each key and
// value URL-encoded (the SDKs encode them once more inside the
// parameter).
func metadataFilter(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, errdefs.Invalid("metadata", "not key=value pairs joined by &: %v", err)
	}
	if len(vals) > 64 {
		return nil, errdefs.Invalid("metadata", "at most 64 filters")
	}
	out := map[string]string{}
	for k, vs := range vals {
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(vs[len(vs)-1])
		if err1 != nil || err2 != nil || !sandbox.ValidTagKey(key) || isReserved(key) || len(val) > maxMetadataValue {
			return nil, errdefs.Invalid("metadata", "%q is not a metadata filter (key=value)", truncate(k))
		}
		out[key] = val
	}
	return out, nil
}

// listOrderAndFilters reads order, startedAfter and template.
func listOrderAndFilters(q url.Values, o *manager.ListOptions) error {
	switch v := q.Get("order"); v {
	case "", "desc":
	case "asc":
		o.Desc = false
	default:
		return errdefs.Invalid("order", "must be asc or desc, got %q", truncate(v))
	}
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return errdefs.Invalid("startedAfter", "%q is not an RFC 3339 time", truncate(v))
		}
		o.StartedAfter = t
	}
	if v := q.Get("template"); v != "" {
		if len(v) > 256 || strings.ContainsAny(v, "\x00\n") {
			return errdefs.Invalid("template", "%q is not a template id or name", truncate(v))
		}
		o.Origin = v
	}
	return nil
}
