package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// maxSnapshotBody bounds a memory snapshot's request body (a name).
const maxSnapshotBody = 64 << 10

// snapshotMemory has sandbox {id}'s node take a memory snapshot and
// records where it is, so a create from it, or a fork, on another node
// can have it sent there.
func (s *Server) snapshotMemory(w http.ResponseWriter, r *http.Request) {
	p, err := s.livePlacement(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSnapshotBody))
	if err != nil {
		s.writeError(w, errdefs.Invalid("body", "%v", err))
		return
	}
	ctx := context.WithoutCancel(r.Context()) // what the node takes is recorded
	sn, a, err := s.takeSnapshot(ctx, p, body)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if a.status == http.StatusCreated {
		s.log.InfoContext(ctx, "memory snapshot taken", "op", "cluster", "snapshot", sn.ID, "sandbox", p.ID, "node", p.Node.ID)
	}
	relay(w, a)
}

// takeSnapshot asks p's node for a memory snapshot (body: the request as
// the caller sent it) and records its location. The node's answer is
// returned whatever it was; an error is a node that did not answer, or a
// snapshot the cluster could not record (then removed from its node).
func (s *Server) takeSnapshot(ctx context.Context, p store.Placement, body []byte) (apiv1.Snapshot, nodeAnswer, error) {
	a, err := s.callNode(ctx, p.Node, http.MethodPost, "/v1/sandboxes/"+p.ID+"/snapshots/memory", bytes.NewReader(body), "application/json")
	if err != nil || a.status != http.StatusCreated {
		return apiv1.Snapshot{}, a, err
	}
	var sn apiv1.Snapshot
	if err := a.decode(&sn); err != nil {
		return apiv1.Snapshot{}, a, err
	}
	l := store.SnapshotLocation{ID: sn.ID, Name: sn.Name, Node: p.Node.ID, Runtime: sn.Runtime, RuntimeVersion: sn.RuntimeVersion,
		SizeBytes: sn.SizeBytes, Record: a.body}
	if err := s.st.AddSnapshot(ctx, l); err != nil {
		s.removeSnapshotOn(ctx, p.Node, sn.ID)
		return apiv1.Snapshot{}, a, err
	}
	return sn, a, nil
}

// livePlacement is sandbox id's placement, refused when its node was
// lost.
func (s *Server) livePlacement(ctx context.Context, id string) (store.Placement, error) {
	p, err := s.st.Lookup(ctx, id)
	if err != nil {
		return store.Placement{}, err
	}
	if p.State == store.Lost {
		return store.Placement{}, lostError(p)
	}
	return p, nil
}

// listSnapshots lists the snapshots the cluster knows (taken through a
// control plane), from the database: each once, as its first node
// answered it.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	ls, err := s.st.Snapshots(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.SnapshotList{Snapshots: []apiv1.Snapshot{}}
	for _, l := range ls {
		var sn apiv1.Snapshot
		if err := json.Unmarshal(l.Record, &sn); err != nil {
			s.log.WarnContext(r.Context(), "a snapshot's stored record does not decode", "op", "cluster", "snapshot", l.ID, "err", err)
			continue
		}
		out.Snapshots = append(out.Snapshots, sn)
	}
	writeJSON(w, http.StatusOK, out)
}

// getSnapshot answers with a node's record of snapshot {ref}: the first
// holder that answers. A holder that no longer has it is forgotten.
func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	locs, err := s.st.SnapshotLocations(r.Context(), r.PathValue("ref"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	last := fmt.Errorf("%w: snapshot %s: no node that holds it is ready", errdefs.ErrUnavailable, locs[0].ID)
	for _, l := range locs {
		n, err := s.st.Node(r.Context(), l.Node)
		if err != nil || n.State != store.NodeReady {
			continue
		}
		a, err := s.callNode(r.Context(), n, http.MethodGet, "/v1/snapshots/"+l.ID, nil, "")
		if err != nil {
			last = err
			continue
		}
		if a.status == http.StatusNotFound {
			s.forgetLocation(r.Context(), l)
			last = fmt.Errorf("%w: snapshot %s", errdefs.ErrNotFound, r.PathValue("ref"))
			continue
		}
		relay(w, a)
		return
	}
	s.writeError(w, last)
}

// deleteSnapshot removes snapshot {ref} from every node that holds it,
// and its locations. A lost holder's location is forgotten (its copy is
// the node's own if it returns); a ready one that does not answer keeps
// its location and the delete answers 503 naming it.
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	locs, err := s.st.SnapshotLocations(r.Context(), r.PathValue("ref"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	var sn apiv1.Snapshot
	if err := json.Unmarshal(locs[0].Record, &sn); err != nil {
		sn = apiv1.Snapshot{ID: locs[0].ID, Name: locs[0].Name}
	}
	if failed := s.removeLocations(context.WithoutCancel(r.Context()), locs); len(failed) > 0 {
		s.writeError(w, fmt.Errorf("%w: snapshot %s: removing it on nodes %s failed; try again", errdefs.ErrUnavailable, sn.ID, strings.Join(failed, ", ")))
		return
	}
	writeJSON(w, http.StatusOK, sn)
}

// removeLocations removes a snapshot on each node of locs and forgets
// those locations; it returns the nodes where that failed.
func (s *Server) removeLocations(ctx context.Context, locs []store.SnapshotLocation) []string {
	var failed []string
	for _, l := range locs {
		n, err := s.st.Node(ctx, l.Node)
		if err == nil && n.State == store.NodeReady {
			if err := s.removeSnapshotOn(ctx, n, l.ID); err != nil {
				failed = append(failed, n.ID)
				continue
			}
		}
		s.forgetLocation(ctx, l)
	}
	return failed
}

// removeSnapshotOn deletes snapshot id on node n; one already gone is
// removed.
func (s *Server) removeSnapshotOn(ctx context.Context, n store.Node, id string) error {
	a, err := s.callNode(ctx, n, http.MethodDelete, "/v1/snapshots/"+id, nil, "")
	if err == nil {
		if err = a.err(); errors.Is(err, errdefs.ErrNotFound) {
			err = nil
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "removing a snapshot on a node", "op", "cluster", "snapshot", id, "node", n.ID, "err", err)
	}
	return err
}

func (s *Server) forgetLocation(ctx context.Context, l store.SnapshotLocation) {
	if err := s.st.RemoveSnapshotLocation(ctx, l.ID, l.Node); err != nil {
		s.log.WarnContext(ctx, "forgetting a snapshot's location", "op", "cluster", "snapshot", l.ID, "node", l.Node, "err", err)
	}
}

// fromSnapshot looks up the snapshot a create starts from and makes req
// ask for what a copy of it takes: the snapshot's runtime and resources,
// a node that holds it preferred.
// The node checks the rest of the spec against it.
func (s *Server) fromSnapshot(ctx context.Context, ref string, req *store.Request) ([]store.SnapshotLocation, error) {
	if !sandbox.ValidSnapshotRef(ref) {
		return nil, errdefs.Invalid("from_snapshot", "%q is neither a snapshot id nor a snapshot name", ref)
	}
	locs, err := s.st.SnapshotLocations(ctx, ref)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("%w: from_snapshot: the cluster knows no snapshot %q (it knows those taken through a control plane)", errdefs.ErrNotFound, ref)
	}
	if err != nil {
		return nil, err
	}
	var sn apiv1.Snapshot
	if err := json.Unmarshal(locs[0].Record, &sn); err != nil {
		return nil, fmt.Errorf("snapshot %s's stored record: %w", locs[0].ID, err)
	}
	req.Runtime, req.RuntimeVersion = locs[0].Runtime, locs[0].RuntimeVersion
	req.Snapshot = locs[0].ID // its holders first: no relay
	req.CPUMilli = milli(sn.CPU, sandbox.DefaultCPU)
	req.MemoryMB = orDefault(sn.MemoryMB, sandbox.DefaultMemoryMB)
	req.DiskMB = orDefault(sn.DiskMB, sandbox.DefaultDiskMB)
	return locs, nil
}
