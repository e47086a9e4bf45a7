package e2b

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/sandbox"
)

// createSnapshot is POST /sandboxes/{id}/snapshots: a memory snapshot of
// the running sandbox (which runs on), usable as a templateID.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var req snapshotRequest
	if err := decode(w, r, &req, true); err != nil {
		s.writeError(w, err)
		return
	}
	if _, err := s.liveSandbox(r); err != nil {
		s.writeError(w, err)
		return
	}
	snap, err := s.m.Snapshots().Take(r.Context(), r.PathValue("id"), req.Name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, snapshotOf(snap))
}

func snapshotOf(snap *sandbox.Snapshot) snapshotInfo {
	out := snapshotInfo{SnapshotID: snap.ID, Names: []string{}}
	if snap.Name != "" {
		out.Names = append(out.Names, snap.Name)
	}
	return out
}

// listSnapshots is GET /snapshots?sandboxID=&name=&limit=&nextToken=:
// the memory snapshots (not the daemon's own), oldest first; the token is
// the last snapshot id of the page.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "sandboxID", "name", "limit", "nextToken":
		default:
			s.writeError(w, errdefs.Invalid(k, "is not a snapshot filter Corral supports"))
			return
		}
	}
	limit := defaultListLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			s.writeError(w, errdefs.Invalid("limit", "must be between 1 and %d, got %q", maxListLimit, truncate(l)))
			return
		}
		limit = n
	}
	all, err := s.m.Snapshots().List(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	slices.SortStableFunc(all, func(a, b *sandbox.Snapshot) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	after := q.Get("nextToken")
	started := after == ""
	out := []snapshotInfo{}
	next := ""
	for _, snap := range all {
		if !started {
			started = snap.ID == after
			continue
		}
		if strings.HasPrefix(snap.Name, manager.ReservedTagPrefix) ||
			q.Has("sandboxID") && snap.SandboxID != q.Get("sandboxID") || q.Has("name") && snap.Name != q.Get("name") {
			continue
		}
		if len(out) == limit {
			next = out[len(out)-1].SnapshotID
			break
		}
		out = append(out, snapshotOf(snap))
	}
	if !started {
		s.writeError(w, errdefs.Invalid("nextToken", "is not a token this API gave (or its snapshot was deleted)"))
		return
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteTemplate is DELETE /templates/{templateID}, which the SDKs use to
// delete a snapshot: 204, or 404 when no snapshot has that id or name.
// Corral images are not deleted here.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("templateID")
	if !sandbox.ValidSnapshotRef(ref) || strings.HasPrefix(ref, manager.ReservedTagPrefix) {
		s.writeError(w, fmt.Errorf("%w: snapshot %q not found", errdefs.ErrNotFound, truncate(ref)))
		return
	}
	if _, err := s.m.Snapshots().Remove(r.Context(), ref); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			err = fmt.Errorf("%w: snapshot %q not found (Corral images are removed with corral image rm)", errdefs.ErrNotFound, truncate(ref))
		}
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// fork is POST /sandboxes/{id}/fork: count copies of the running
// sandbox, each with the timeout given. Corral forks all or nothing, so
// either every result holds a sandbox or every one the same error.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	var req forkRequest
	if err := decode(w, r, &req, true); err != nil {
		s.writeError(w, err)
		return
	}
	n := 1
	if req.Count != nil {
		n = *req.Count
	}
	if n < 1 || n > manager.MaxFork {
		s.writeError(w, errdefs.Invalid("count", "want 1 to %d copies, got %d", manager.MaxFork, n))
		return
	}
	d, err := seconds("timeout", req.Timeout, DefaultTimeout)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if _, err := s.liveSandbox(r); err != nil {
		s.writeError(w, err)
		return
	}
	copies, err := s.m.Snapshots().Fork(r.Context(), r.PathValue("id"), n)
	out := make([]forkResult, n)
	for i := range out {
		if err != nil {
			st := errdefs.HTTPStatus(err)
			out[i].Error = &apiError{Code: st, Message: s.red.String(err.Error())}
			continue
		}
		sb := copies[i]
		if upd, uerr := s.m.Update(r.Context(), sb.ID, manager.Update{Timeout: &d}); uerr == nil {
			sb = upd
		}
		o := s.sandboxOut(sb)
		out[i].Sandbox = &o
	}
	writeJSON(w, http.StatusCreated, out)
}
