package control

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// E2B's snapshots and forks through a control plane are the native
// cluster machinery (snapshots.go, fork.go, transfer.go) in E2B's shape:
// a snapshot is taken by the sandbox's node's native API and recorded in
// snapshot_locations, so a create from it (e2bCreate), a fork, a list or
// a delete sees it wherever it is.

// e2bSnapshotBody is E2B's snapshot request (POST
// /sandboxes/{id}/snapshots).
type e2bSnapshotBody struct {
	Name string `json:"name,omitempty"`
}

// e2bSnapshotInfo is E2B's SnapshotInfo.
type e2bSnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func e2bSnapshotOf(id, name string) e2bSnapshotInfo {
	out := e2bSnapshotInfo{SnapshotID: id, Names: []string{}}
	if name != "" {
		out.Names = append(out.Names, name)
	}
	return out
}

// e2bDecode reads a bounded, strictly typed JSON body into v; an empty
// body is an empty object.
func e2bDecode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSnapshotBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return errdefs.Invalid(strings.Trim(f, `"`), "is not a field Corral's E2B API knows")
		}
		return errdefs.Invalid("body", "want a JSON object: %v", err)
	}
	if dec.More() {
		return errdefs.Invalid("body", "trailing data after the JSON object")
	}
	return nil
}

// e2bSnapshot is POST /sandboxes/{id}/snapshots: a memory snapshot taken
// by the sandbox's node (which runs on), recorded for the cluster.
func (s *Server) e2bSnapshot(w http.ResponseWriter, r *http.Request) {
	var req e2bSnapshotBody
	if err := e2bDecode(w, r, &req); err != nil {
		s.e2bError(w, err)
		return
	}
	if strings.HasPrefix(req.Name, sandbox.ReservedTagPrefix) {
		s.e2bError(w, errdefs.Invalid("name", "names beginning with %q are Corral's own", sandbox.ReservedTagPrefix))
		return
	}
	p, err := s.livePlacement(r.Context(), r.PathValue("id"))
	if err != nil {
		s.e2bError(w, err)
		return
	}
	body, _ := json.Marshal(apiv1.SnapshotMemoryRequest{Name: req.Name})
	sn, a, err := s.takeSnapshot(context.WithoutCancel(r.Context()), p, body)
	if err == nil {
		err = a.takenErr()
	}
	if err != nil {
		s.e2bError(w, err)
		return
	}
	s.log.InfoContext(r.Context(), "memory snapshot taken", "op", "cluster", "snapshot", sn.ID, "sandbox", p.ID, "node", p.Node.ID)
	writeJSON(w, http.StatusCreated, e2bSnapshotOf(sn.ID, sn.Name))
}

// e2bListSnapshots is GET /snapshots?sandboxID=&name=&limit=&nextToken=:
// the snapshots the cluster knows, oldest first; the token is the last
// snapshot id of the page.
func (s *Server) e2bListSnapshots(w http.ResponseWriter, r *http.Request) {
	f, err := parseE2BSnapshotQuery(r.URL.Query())
	if err != nil {
		s.e2bError(w, err)
		return
	}
	ls, err := s.st.Snapshots(r.Context())
	if err != nil {
		s.e2bError(w, err)
		return
	}
	var all []apiv1.Snapshot
	for _, l := range ls {
		var sn apiv1.Snapshot
		if err := json.Unmarshal(l.Record, &sn); err != nil {
			s.log.WarnContext(r.Context(), "a snapshot's stored record does not decode", "op", "cluster", "snapshot", l.ID, "err", err)
			continue
		}
		all = append(all, sn)
	}
	page, next, err := f.page(all)
	if err != nil {
		s.e2bError(w, err)
		return
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, page)
}

// e2bSnapshotQuery is a snapshot list's filters and page.
type e2bSnapshotQuery struct {
	sandboxID, name, after string
	bySandbox, byName      bool
	limit                  int
}

func parseE2BSnapshotQuery(q url.Values) (e2bSnapshotQuery, error) {
	for k := range q {
		switch k {
		case "sandboxID", "name", "limit", "nextToken":
		default:
			return e2bSnapshotQuery{}, errdefs.Invalid(k, "is not a snapshot filter Corral supports")
		}
	}
	f := e2bSnapshotQuery{sandboxID: q.Get("sandboxID"), name: q.Get("name"), after: q.Get("nextToken"),
		bySandbox: q.Has("sandboxID"), byName: q.Has("name"), limit: e2bDefaultLimit}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > e2bMaxLimit {
			return e2bSnapshotQuery{}, errdefs.Invalid("limit", "must be between 1 and %d, got %q", e2bMaxLimit, truncated(l))
		}
		f.limit = n
	}
	return f, nil
}

// page is f's page of all (sorted here, oldest first) and the token of
// the next ("" at the end). Corral's own snapshots (a fork's, named with
// the reserved prefix) are not shown.
func (f e2bSnapshotQuery) page(all []apiv1.Snapshot) ([]e2bSnapshotInfo, string, error) {
	slices.SortStableFunc(all, func(a, b apiv1.Snapshot) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	started := f.after == ""
	out := []e2bSnapshotInfo{}
	for _, sn := range all {
		if !started {
			started = sn.ID == f.after
			continue
		}
		if strings.HasPrefix(sn.Name, sandbox.ReservedTagPrefix) ||
			f.bySandbox && sn.SandboxID != f.sandboxID || f.byName && sn.Name != f.name {
			continue
		}
		if len(out) == f.limit {
			return out, out[len(out)-1].SnapshotID, nil
		}
		out = append(out, e2bSnapshotOf(sn.ID, sn.Name))
	}
	if !started {
		return nil, "", errdefs.Invalid("nextToken", "is not a token this API gave (or its snapshot was deleted)")
	}
	return out, "", nil
}

// e2bDeleteTemplate is DELETE /templates/{templateID}, which the SDKs use
// to delete a snapshot: removed from every node that holds it (204), or a
// 404 when the cluster knows no snapshot of that id or name. Images are
// not deleted here.
func (s *Server) e2bDeleteTemplate(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("templateID")
	notFound := fmt.Errorf("%w: snapshot %q not found (Corral images are removed with corral image rm)", errdefs.ErrNotFound, truncated(ref))
	if !sandbox.ValidSnapshotRef(ref) || strings.HasPrefix(ref, sandbox.ReservedTagPrefix) {
		s.e2bError(w, notFound)
		return
	}
	locs, err := s.st.SnapshotLocations(r.Context(), ref)
	if errors.Is(err, errdefs.ErrNotFound) {
		err = notFound
	}
	if err != nil {
		s.e2bError(w, err)
		return
	}
	if failed := s.removeLocations(context.WithoutCancel(r.Context()), locs); len(failed) > 0 {
		s.e2bError(w, fmt.Errorf("%w: snapshot %s: removing it on nodes %s failed; try again", errdefs.ErrUnavailable, locs[0].ID, strings.Join(failed, ", ")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// e2bBaseTemplate is E2B's default template (internal/e2b's
// BaseTemplate), which every node builds itself.
const e2bBaseTemplate = "base"

// e2bSnapshotTemplate is the snapshot an E2B create's templateID names,
// when the cluster knows one by that id or name (nil when it names
// something else: the base template or an image, which the node
// resolves). req is made to ask for what a copy of it takes.
func (s *Server) e2bSnapshotTemplate(ctx context.Context, templateID string, req *store.Request) ([]store.SnapshotLocation, error) {
	// "base" is E2B's base template before any snapshot so named, as a
	// node resolves it.
	if templateID == e2bBaseTemplate || !sandbox.ValidSnapshotRef(templateID) || strings.HasPrefix(templateID, sandbox.ReservedTagPrefix) {
		return nil, nil
	}
	if _, err := s.st.SnapshotLocations(ctx, templateID); errors.Is(err, errdefs.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return s.fromSnapshot(ctx, templateID, req)
}

// truncated bounds a caller's string quoted in an error.
func truncated(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// e2bForkBody is E2B's fork request.
type e2bForkBody struct {
	Count   *int     `json:"count,omitempty"`
	Timeout *float64 `json:"timeout,omitempty"`
}

// e2bDefaultTimeout is a copy's lifetime when a fork names none (E2B's
// default, as internal/e2b's DefaultTimeout).
const e2bDefaultTimeout = 15

// e2bForkResult is one copy of an E2B fork: its sandbox or the error.
type e2bForkResult struct {
	Sandbox *json.RawMessage `json:"sandbox,omitempty"`
	Error   *e2bErrorBody    `json:"error,omitempty"`
}

// readE2BFork reads an E2B fork's body: count (1 to maxFork, 1 when
// absent) and each copy's timeout in seconds.
func readE2BFork(w http.ResponseWriter, r *http.Request) (count int, timeout float64, err error) {
	var req e2bForkBody
	if err := e2bDecode(w, r, &req); err != nil {
		return 0, 0, err
	}
	count, timeout = 1, e2bDefaultTimeout
	if req.Count != nil {
		count = *req.Count
	}
	if count < 1 || count > maxFork {
		return 0, 0, errdefs.Invalid("count", "want 1 to %d copies, got %d", maxFork, count)
	}
	if req.Timeout != nil {
		timeout = *req.Timeout
		if math.IsNaN(timeout) || timeout < 0 || timeout > sandbox.MaxTimeout.Seconds() {
			return 0, 0, errdefs.Invalid("timeout", "must be between 0 and %g seconds, got %v", sandbox.MaxTimeout.Seconds(), timeout)
		}
	}
	return count, timeout, nil
}

// e2bFork is POST /sandboxes/{id}/fork: copies placed across the cluster
// as the native fork places them, each then given the timeout asked for
// and answered as its node's E2B face answers a sandbox. All or nothing:
// either every result holds a sandbox or every one the same error.
func (s *Server) e2bFork(w http.ResponseWriter, r *http.Request) {
	count, timeout, err := readE2BFork(w, r)
	if err != nil {
		s.e2bError(w, err)
		return
	}
	p, err := s.livePlacement(r.Context(), r.PathValue("id"))
	if err != nil {
		s.e2bError(w, err)
		return
	}
	ctx := context.WithoutCancel(r.Context())
	copies, err := s.forkPlaced(ctx, p, count)
	out := make([]e2bForkResult, count)
	if err == nil {
		for i, c := range copies {
			if out[i].Sandbox, err = s.e2bCopy(ctx, c, timeout); err != nil {
				break
			}
		}
	}
	if err != nil {
		if copies != nil {
			s.endCopies(ctx, copies)
		}
		st, msg := errdefs.HTTPStatus(err), err.Error()
		if st == http.StatusInternalServerError {
			s.log.WarnContext(ctx, "an e2b fork failed", "op", "cluster", "sandbox", p.ID, "err", err)
			msg = "internal error"
		}
		for i := range out {
			out[i] = e2bForkResult{Error: &e2bErrorBody{Code: st, Message: msg}}
		}
	} else {
		s.log.InfoContext(ctx, "sandbox forked across the cluster", "op", "cluster", "sandbox", p.ID, "copies", count)
	}
	writeJSON(w, http.StatusCreated, out)
}

// e2bCopy gives fork copy c its lifetime through its node's E2B face and
// reads it as that face answers a create: the E2B Sandbox object (id,
// template, envd access token) from the copy's details.
func (s *Server) e2bCopy(ctx context.Context, c *forkCopy, timeout float64) (*json.RawMessage, error) {
	body, _ := json.Marshal(map[string]float64{"timeout": timeout})
	a, err := s.callNode(ctx, c.rsv.Node, http.MethodPost, "/e2b/sandboxes/"+c.id+"/timeout", bytes.NewReader(body), "application/json")
	if err == nil {
		err = e2bAnswerErr(a)
	}
	if err != nil {
		return nil, fmt.Errorf("setting fork copy %s's timeout: %w", c.id, err)
	}
	a, err = s.callNode(ctx, c.rsv.Node, http.MethodGet, "/e2b/sandboxes/"+c.id, nil, "")
	if err == nil {
		err = e2bAnswerErr(a)
	}
	if err != nil {
		return nil, fmt.Errorf("reading fork copy %s: %w", c.id, err)
	}
	sb, err := e2bSandboxOfDetail(a.body)
	if err != nil {
		return nil, fmt.Errorf("%w: fork copy %s's details from node %s: %v", errdefs.ErrUnavailable, c.id, c.rsv.Node.ID, err)
	}
	return &sb, nil
}

// e2bSandboxOfDetail is E2B's Sandbox (what a create answers) of its
// SandboxDetail (what GET /sandboxes/{id} answers): the fields the two
// share, as the node wrote them.
func e2bSandboxOfDetail(detail []byte) (json.RawMessage, error) {
	var d map[string]json.RawMessage
	if err := json.Unmarshal(detail, &d); err != nil {
		return nil, err
	}
	if len(d["sandboxID"]) == 0 {
		return nil, errors.New("no sandboxID")
	}
	out := map[string]json.RawMessage{}
	for _, k := range []string{"sandboxID", "templateID", "clientID", "alias", "envdVersion", "envdAccessToken", "domain"} {
		if v, ok := d[k]; ok {
			out[k] = v
		}
	}
	out["trafficAccessToken"] = json.RawMessage("null")
	if _, ok := out["domain"]; !ok {
		out["domain"] = json.RawMessage("null")
	}
	b, err := json.Marshal(out)
	return b, err
}

// endCopies removes fork copies already bound to their placements (an
// E2B fork that failed after the native fork succeeded).
func (s *Server) endCopies(ctx context.Context, copies []*forkCopy) {
	for _, c := range copies {
		s.removeOnNode(ctx, c.rsv.Node, c.id)
		if err := s.st.End(ctx, c.id); err != nil {
			s.log.WarnContext(ctx, "ending a fork copy's placement", "op", "cluster", "sandbox", c.id, "err", err)
		}
	}
}

// takenErr is a node's answer to a memory snapshot that took none as an
// error (nil for its 201).
func (a nodeAnswer) takenErr() error {
	if a.status == http.StatusCreated {
		return nil
	}
	if err := a.err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: a node answered a memory snapshot with %d, not 201", errdefs.ErrUnavailable, a.status)
}

// e2bAnswerErr is a node's E2B error answer as an error of its status's
// kind, its message as the node wrote it (nil for a 2xx).
func e2bAnswerErr(a nodeAnswer) error {
	if a.status >= 200 && a.status < 300 {
		return nil
	}
	var b e2bErrorBody
	msg := strings.TrimSpace(string(a.body))
	if json.Unmarshal(a.body, &b) == nil && b.Message != "" {
		msg = b.Message
	}
	return fmt.Errorf("%w: %s", kindOfStatus(a.status), msg)
}

// kindOfStatus is the error kind an HTTP status stands for (the inverse
// of errdefs.HTTPStatus, 400 read as invalid input).
func kindOfStatus(status int) error {
	switch status {
	case http.StatusBadRequest:
		return errdefs.ErrInvalidArgument
	case http.StatusUnauthorized:
		return errdefs.ErrUnauthenticated
	case http.StatusForbidden:
		return errdefs.ErrPermissionDenied
	case http.StatusNotFound:
		return errdefs.ErrNotFound
	case http.StatusConflict:
		return errdefs.ErrFailedPrecondition
	case http.StatusTooManyRequests:
		return errdefs.ErrResourceExhausted
	case http.StatusGatewayTimeout:
		return errdefs.ErrDeadlineExceeded
	default:
		return errdefs.ErrUnavailable
	}
}
