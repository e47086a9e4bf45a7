package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// moveTimeout bounds one move: its snapshot, its relay, its restore.
const moveTimeout = transferTimeout + 2*createTimeout

// mover is one move in flight: its record, beaten while it runs.
type mover struct {
	s    *Server
	from store.Node
	mu   sync.Mutex
	m    store.DrainMove
}

// note records how far the move got (target, snapshot).
func (mv *mover) note(ctx context.Context, target, snapshot string) {
	mv.mu.Lock()
	mv.m.Target, mv.m.Snapshot = target, snapshot
	m := mv.m
	mv.mu.Unlock()
	if err := mv.s.st.MoveProgress(context.WithoutCancel(ctx), m); err != nil {
		mv.s.log.Warn("recording a move's progress", "op", "cluster", "sandbox", m.Sandbox, "err", err)
	}
}

// beat records that the mover lives until stop is called.
func (mv *mover) beat(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(moveBeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			mv.mu.Lock()
			m := mv.m
			mv.mu.Unlock()
			_ = mv.s.st.MoveProgress(ctx, m)
		}
	}()
	return func() { close(done) }
}

// runMove moves sandbox m off draining node from and records how it
// ended: moved, or failed or stuck with the reason.
func (s *Server) runMove(ctx context.Context, from store.Node, m store.DrainMove) {
	ctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	mv := &mover{s: s, from: from, m: m}
	stop := mv.beat(ctx)
	state, reason := s.move(ctx, mv)
	stop()
	mv.mu.Lock()
	m = mv.m
	mv.mu.Unlock()
	if err := s.st.MoveDone(context.WithoutCancel(ctx), m, state, reason); err != nil {
		s.log.Warn("recording a move's end", "op", "cluster", "sandbox", m.Sandbox, "err", err)
	}
	if state == store.MoveMoved {
		s.log.Info("paused sandbox moved off a draining node", "op", "cluster", "sandbox", m.Sandbox, "from", from.ID, "to", m.Target)
	} else {
		s.log.Warn("a paused sandbox stays on its draining node", "op", "cluster", "sandbox", m.Sandbox, "node", from.ID, "state", state, "reason", reason)
	}
}

// move is one sandbox's move, all or nothing: a memory snapshot of the
// paused sandbox on its node (resumed for it, paused again at once), room
// reserved on a node of its runtime and version as a create reserves it,
// the snapshot sent there and restored under the sandbox's id, paused;
// then, the source still paused, the placement turned to the target, and
// the source's sandbox and both snapshots removed. Any failure before
// the placement turns removes what the target got and releases the
// room: the sandbox stays where it was, paused.
func (s *Server) move(ctx context.Context, mv *mover) (state, reason string) {
	from, id := mv.from, mv.m.Sandbox
	if mv.m.Target != "" {
		done, err := s.recoverMove(ctx, mv)
		if err != nil {
			return store.MoveFailed, "finishing an interrupted move: " + err.Error()
		}
		if done {
			return store.MoveMoved, ""
		}
	}
	var sb apiv1.Sandbox
	if err := s.getOnNode(ctx, from, "/v1/sandboxes/"+id, &sb); errors.Is(err, errdefs.ErrNotFound) {
		return store.MoveStuck, "it is gone from its node" // dropped at the next scan
	} else if err != nil {
		return store.MoveFailed, "reading it on its node: " + err.Error()
	}
	if why := unmovable(sb); why != "" {
		return store.MoveStuck, why
	}
	p, err := s.st.Lookup(ctx, id)
	if err != nil || p.Node.ID != from.ID || p.State != store.Placed {
		return store.MoveStuck, "not placed on this node by the cluster"
	}
	rsv, err := s.st.Reserve(ctx, store.Request{Runtime: sb.Runtime, RuntimeVersion: from.RuntimeVersions[sb.Runtime],
		CPUMilli: milli(sb.CPU, sandbox.DefaultCPU), MemoryMB: orDefault(sb.MemoryMB, sandbox.DefaultMemoryMB),
		DiskMB: orDefault(sb.DiskMB, sandbox.DefaultDiskMB), Exclude: []string{from.ID}, FreshWithin: s.cfg.LostAfter})
	if err != nil {
		return store.MoveFailed, "no node to move it to: " + err.Error()
	}
	mv.note(ctx, rsv.Node.ID, "")
	undo := context.WithoutCancel(ctx)
	if err := s.moveTo(ctx, mv, p, rsv, sb.Name); err != nil {
		s.release(undo, rsv)
		mv.note(undo, "", "")
		return store.MoveFailed, err.Error()
	}
	if err := s.removeMoved(undo, from, id); err != nil {
		// The next scan of the node removes the copy left there.
		s.log.Warn("removing a moved sandbox from its old node", "op", "cluster", "sandbox", id, "node", from.ID, "err", err)
	}
	return store.MoveMoved, ""
}

// moveTo takes the snapshot, restores it on rsv's node and turns the
// placement; on an error nothing of the sandbox is left on the target
// (the caller releases rsv). The snapshot is removed everywhere either
// way.
func (s *Server) moveTo(ctx context.Context, mv *mover, p store.Placement, rsv store.Placement, name string) error {
	undo := context.WithoutCancel(ctx)
	from, to, id := mv.from, rsv.Node, p.ID
	sn, err := s.snapshotPaused(ctx, from, p)
	if sn.ID != "" {
		mv.note(ctx, to.ID, sn.ID)
		defer s.dropSnapshot(undo, sn.ID)
	}
	if err != nil {
		return err
	}
	locs, err := s.st.SnapshotLocations(ctx, sn.ID)
	if err == nil {
		err = s.ensureSnapshot(ctx, to, locs)
	}
	if err != nil {
		return fmt.Errorf("sending its snapshot to node %s: %w", to.ID, err)
	}
	if err := s.moveIn(ctx, to, id, sn.ID, name); err != nil {
		s.removeMovedQuietly(undo, to, id) // an answer lost on the way
		return fmt.Errorf("restoring it on node %s: %w", to.ID, err)
	}
	// What the target holds is the source as it was snapshotted: a
	// source resumed meanwhile (through a control plane) stays.
	var now apiv1.Sandbox
	if err := s.getOnNode(ctx, from, "/v1/sandboxes/"+id, &now); err != nil || now.State != "paused" {
		s.removeMovedQuietly(undo, to, id)
		if err == nil {
			err = fmt.Errorf("%w: it was %s during the move", errdefs.ErrFailedPrecondition, now.State)
		}
		return err
	}
	if err := s.st.Move(ctx, id, from.ID, rsv.ID); err != nil {
		s.removeMovedQuietly(undo, to, id)
		return err
	}
	return nil
}

// snapshotPaused takes a memory snapshot of paused sandbox p: resumed
// for it (a snapshot is of a running sandbox) and paused again whatever
// the snapshot's outcome. The snapshot's record is returned when it was
// taken, even with an error.
func (s *Server) snapshotPaused(ctx context.Context, n store.Node, p store.Placement) (apiv1.Snapshot, error) {
	a, err := s.callNode(ctx, n, http.MethodPost, "/v1/sandboxes/"+p.ID+"/resume", http.NoBody, "")
	if err == nil {
		err = a.err()
	}
	if err != nil {
		return apiv1.Snapshot{}, fmt.Errorf("resuming it for its snapshot: %w", err)
	}
	sn, a, err := s.takeSnapshot(ctx, p, []byte(`{}`))
	if err == nil {
		err = a.err()
	}
	if err != nil {
		err = fmt.Errorf("taking its memory snapshot: %w", err)
	}
	if perr := s.pauseOn(context.WithoutCancel(ctx), n, p.ID); perr != nil {
		err = errors.Join(err, fmt.Errorf("pausing it again: %w", perr))
	}
	return sn, err
}

// pauseOn pauses sandbox id on node n; one that is paused already (its
// idle timeout paused it meanwhile) is no error.
func (s *Server) pauseOn(ctx context.Context, n store.Node, id string) error {
	a, err := s.callNode(ctx, n, http.MethodPost, "/v1/sandboxes/"+id+"/pause", http.NoBody, "")
	if err != nil {
		return err
	}
	if err := a.err(); errors.Is(err, errdefs.ErrFailedPrecondition) {
		var sb apiv1.Sandbox
		if gerr := s.getOnNode(ctx, n, "/v1/sandboxes/"+id, &sb); gerr != nil || sb.State != "paused" {
			return err
		}
	} else if err != nil {
		return err
	}
	return nil
}

// moveIn has node n start sandbox id from snapshot sn, paused.
func (s *Server) moveIn(ctx context.Context, n store.Node, id, sn, name string) error {
	body, err := json.Marshal(apiv1.MoveInRequest{ID: id, Snapshot: sn, Name: name})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	a, err := s.callNode(cctx, n, http.MethodPost, apiv1.NodeMoveIn, bytes.NewReader(body), "application/json")
	if err != nil {
		return err
	}
	return a.err()
}

// removeMoved has node n terminate and forget sandbox id.
func (s *Server) removeMoved(ctx context.Context, n store.Node, id string) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	a, err := s.callNode(cctx, n, http.MethodPost, apiv1.NodeMoveRemove+id, http.NoBody, "")
	if err != nil {
		return err
	}
	return a.err()
}

func (s *Server) removeMovedQuietly(ctx context.Context, n store.Node, id string) {
	if err := s.removeMoved(ctx, n, id); err != nil {
		s.log.Warn("removing a sandbox a move left on its target", "op", "cluster", "sandbox", id, "node", n.ID, "err", err)
	}
}

// dropSnapshot removes a move's snapshot from every node that holds it.
func (s *Server) dropSnapshot(ctx context.Context, id string) {
	if locs, err := s.st.SnapshotLocations(ctx, id); err == nil {
		s.removeLocations(ctx, locs)
	}
}

// recoverMove takes over a move whose mover stopped midway: when the
// placement already turned to the target, only the source's copy and
// the snapshot are left to remove (done); otherwise what the target may
// hold is removed, the snapshot dropped and the source paused again (the
// mover may have resumed it for its snapshot), for the move to start
// over.
func (s *Server) recoverMove(ctx context.Context, mv *mover) (done bool, err error) {
	from, id := mv.from, mv.m.Sandbox
	if mv.m.Snapshot != "" {
		defer s.dropSnapshot(ctx, mv.m.Snapshot)
	}
	p, err := s.st.Lookup(ctx, id)
	if err == nil && p.State == store.Placed && p.Node.ID == mv.m.Target {
		if err := s.removeMoved(ctx, from, id); err != nil { // the next scan removes it
			s.log.Warn("removing a moved sandbox from its old node", "op", "cluster", "sandbox", id, "node", from.ID, "err", err)
		}
		return true, nil
	}
	if to, err := s.st.Node(ctx, mv.m.Target); err == nil && to.State == store.NodeReady {
		if err := s.removeMoved(ctx, to, id); err != nil {
			return false, fmt.Errorf("removing what node %s got: %w", to.ID, err)
		}
	}
	var sb apiv1.Sandbox
	if err := s.getOnNode(ctx, from, "/v1/sandboxes/"+id, &sb); err == nil && sb.State == "running" {
		if err := s.pauseOn(ctx, from, id); err != nil {
			return false, fmt.Errorf("pausing it again: %w", err)
		}
	}
	mv.note(ctx, "", "")
	return false, nil
}
