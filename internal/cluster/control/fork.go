package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// maxFork bounds the copies of one fork, as a node's own fork does.
const maxFork = 100

// forkCopy is one copy of a fork: its reservation and, once started,
// its id and record.
type forkCopy struct {
	rsv store.Placement
	id  string
	sb  apiv1.Sandbox
}

// fork starts copies of sandbox {id} placed across the cluster: a memory
// snapshot on its node, room reserved for every copy as a create reserves
// it (copies may land on any node with the runtime), the snapshot sent to
// each node that lacks it, a copy restored on each; then the snapshot is
// removed everywhere. All or nothing: on any failure the copies made are
// removed and every reservation released.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	count, err := readForkCount(w, r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	p, err := s.livePlacement(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	ctx := context.WithoutCancel(r.Context()) // what the nodes make is undone or bound
	copies, err := s.forkPlaced(ctx, p, count)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.ForkResult{Sandboxes: make([]apiv1.Sandbox, len(copies))}
	ids := make([]string, len(copies))
	for i, c := range copies {
		out.Sandboxes[i], ids[i] = c.sb, c.id
	}
	s.log.InfoContext(ctx, "sandbox forked across the cluster", "op", "cluster", "sandbox", p.ID, "copies", strings.Join(ids, ","))
	writeJSON(w, http.StatusCreated, out)
}

// forkPlaced forks placed sandbox p into count copies across the
// cluster (the native fork's and E2B's): its record read, a memory
// snapshot taken on its node, the copies made (forkCopies), then the
// snapshot removed everywhere.
func (s *Server) forkPlaced(ctx context.Context, p store.Placement, count int) ([]*forkCopy, error) {
	var parent apiv1.Sandbox
	if err := s.getOnNode(ctx, p.Node, "/v1/sandboxes/"+p.ID, &parent); err != nil {
		return nil, err
	}
	sn, a, err := s.takeSnapshot(ctx, p, []byte(`{}`))
	if err == nil {
		err = a.takenErr()
	}
	if err != nil {
		return nil, fmt.Errorf("forking sandbox %s: %w", p.ID, err)
	}
	defer func() {
		if locs, err := s.st.SnapshotLocations(ctx, sn.ID); err == nil {
			s.removeLocations(ctx, locs)
		}
	}()
	copies, err := s.forkCopies(ctx, p, parent, sn, count)
	if err != nil {
		return nil, fmt.Errorf("forking sandbox %s: %w", p.ID, err)
	}
	return copies, nil
}

// readForkCount reads a fork's body: count, 1 to maxFork.
func readForkCount(w http.ResponseWriter, r *http.Request) (int, error) {
	var req apiv1.ForkRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return 0, errdefs.Invalid("body", "want {\"count\": n}: %v", err)
	}
	if req.Count < 1 || req.Count > maxFork {
		return 0, errdefs.Invalid("count", "want 1 to %d copies, got %d", maxFork, req.Count)
	}
	return req.Count, nil
}

// forkCopies reserves, restores and binds count copies of snapshot sn
// of sandbox p; on failure nothing of them is left.
func (s *Server) forkCopies(ctx context.Context, p store.Placement, parent apiv1.Sandbox, sn apiv1.Snapshot, count int) ([]*forkCopy, error) {
	locs, err := s.st.SnapshotLocations(ctx, sn.ID)
	if err != nil {
		return nil, err
	}
	req := store.Request{Runtime: sn.Runtime, RuntimeVersion: sn.RuntimeVersion, CPUMilli: milli(sn.CPU, sandbox.DefaultCPU), MemoryMB: orDefault(sn.MemoryMB, sandbox.DefaultMemoryMB),
		DiskMB: orDefault(sn.DiskMB, sandbox.DefaultDiskMB), FreshWithin: s.cfg.LostAfter}
	copies := make([]*forkCopy, 0, count)
	undo := func() {
		for _, c := range copies {
			if c.id != "" {
				s.removeOnNode(ctx, c.rsv.Node, c.id)
			}
			s.release(ctx, c.rsv)
		}
	}
	for range count {
		rsv, err := s.st.Reserve(ctx, req)
		if err != nil {
			undo()
			return nil, err
		}
		copies = append(copies, &forkCopy{rsv: rsv})
	}
	if err := s.sendToAll(ctx, copies, locs); err != nil {
		undo()
		return nil, err
	}
	errs := make([]error, len(copies))
	var wg sync.WaitGroup
	for i, c := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.startCopy(ctx, c, p.ID, sn.ID, parent.Tags)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		undo()
		return nil, err
	}
	for i, c := range copies {
		if err := s.st.BindRecord(ctx, c.rsv.ID, c.id, "", recordJSON(c.sb)); err != nil {
			for _, b := range copies[:i] {
				s.removeOnNode(ctx, b.rsv.Node, b.id)
				if err := s.st.End(ctx, b.id); err != nil {
					s.log.WarnContext(ctx, "ending a fork copy's placement", "op", "cluster", "sandbox", b.id, "err", err)
				}
			}
			copies = copies[i:]
			undo()
			return nil, err
		}
	}
	return copies, nil
}

// sendToAll has every node the copies were placed on hold the snapshot,
// each node once, at once.
func (s *Server) sendToAll(ctx context.Context, copies []*forkCopy, locs []store.SnapshotLocation) error {
	nodes := map[string]store.Node{}
	for _, c := range copies {
		nodes[c.rsv.Node.ID] = c.rsv.Node
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.ensureSnapshot(ctx, n, locs); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startCopy restores one copy on its reserved node, tagged with the
// sandbox it was forked from, and reads its record.
func (s *Server) startCopy(ctx context.Context, c *forkCopy, parent, snapshot string, tags map[string]string) error {
	body, err := json.Marshal(apiv1.ForkCopyRequest{Snapshot: snapshot, ForkedFrom: parent, Tags: tags})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	a, err := s.callNode(cctx, c.rsv.Node, http.MethodPost, apiv1.NodeForkCopy, bytes.NewReader(body), "application/json")
	if err != nil {
		return err
	}
	var fc apiv1.ForkCopy
	if err := a.decode(&fc); err != nil {
		return fmt.Errorf("a copy on node %s: %w", c.rsv.Node.ID, err)
	}
	c.id = fc.ID
	return s.getOnNode(ctx, c.rsv.Node, "/v1/sandboxes/"+fc.ID, &c.sb)
}

// getOnNode reads the JSON answer of GET path on node n into v.
func (s *Server) getOnNode(ctx context.Context, n store.Node, path string, v any) error {
	a, err := s.callNode(ctx, n, http.MethodGet, path, http.NoBody, "")
	if err != nil {
		return err
	}
	return a.decode(v)
}
