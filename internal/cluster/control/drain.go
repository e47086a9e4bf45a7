package control

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// A drain moves a draining node's paused sandboxes to other nodes
// (move.go). The leader runs the moves (drainPass from lead): its lock
// already makes one instance do the cluster's own jobs, and every step
// of a move is recorded in the database (drain_moves), so a leader that
// dies mid-drain leaves what the next one needs: pending moves are
// claimed again, and a move whose mover stopped beating is finished or
// undone (recoverMove). A drain call only records the drain and answers.

// maxMoves bounds the moves one leader runs at once: each takes a memory
// snapshot, sends it between nodes and restores it, disk and network
// heavy on both nodes.
const maxMoves = 3

// moveStale is how long a moving sandbox's mover may be silent before
// another instance takes the move over; a mover beats every moveBeat.
const (
	moveStale = time.Minute
	moveBeat  = 10 * time.Second
)

// drainer is the leader's state of its drain passes.
type drainer struct {
	slots   chan struct{} // one per move running
	passing atomic.Bool   // a pass runs
	// running counts the pass and the moves: the leader waits for them
	// (their undoing, when it stops) before the store closes.
	running sync.WaitGroup
}

func newDrainer() *drainer { return &drainer{slots: make(chan struct{}, maxMoves)} }

// drainTick starts a drain pass unless one runs; the leader calls it at
// each tick.
func (s *Server) drainTick(ctx context.Context) {
	if !s.drains.passing.CompareAndSwap(false, true) {
		return
	}
	s.drains.running.Add(1)
	go func() {
		defer s.drains.running.Done()
		defer s.drains.passing.Store(false)
		s.drainPass(ctx)
	}()
}

// drainPass looks at every ready draining node: what it runs is recorded
// (to move, or why not) and moves are started while slots are free.
func (s *Server) drainPass(ctx context.Context) {
	ns, err := s.st.Nodes(ctx)
	if err != nil {
		s.log.Warn("a drain pass: listing the nodes", "op", "cluster", "err", err)
		return
	}
	ds, err := s.st.Drains(ctx)
	if err != nil {
		s.log.Warn("a drain pass: reading the drains", "op", "cluster", "err", err)
		return
	}
	for _, n := range ns {
		if !n.Draining || n.State != store.NodeReady {
			continue
		}
		d, ok := ds[n.ID]
		if !ok { // drained before drains were recorded
			if err := s.st.StartDrain(ctx, n.ID); err != nil {
				s.log.Warn("a drain pass", "op", "cluster", "node", n.ID, "err", err)
				continue
			}
		}
		if err := s.scanDrained(ctx, n, d); err != nil {
			s.log.Warn("a drain pass: listing a draining node's sandboxes", "op", "cluster", "node", n.ID, "err", err)
			continue
		}
		s.startMoves(ctx, n)
	}
}

// startMoves claims as many of node n's moves as slots are free and runs
// each.
func (s *Server) startMoves(ctx context.Context, n store.Node) {
	ms, err := s.st.ClaimMoves(ctx, n.ID, cap(s.drains.slots)-len(s.drains.slots), moveStale)
	if err != nil {
		s.log.Warn("a drain pass: claiming moves", "op", "cluster", "node", n.ID, "err", err)
		return
	}
	for _, m := range ms {
		s.drains.slots <- struct{}{}
		s.drains.running.Add(1)
		go func() {
			defer func() { <-s.drains.slots; s.drains.running.Done() }()
			s.runMove(ctx, n, m)
		}()
	}
}

// scanDrained records what draining node n (its drain d so far) runs:
// each paused sandbox to move, every other live one with why it stays. A
// sandbox that d moved away and that is still here is the copy its move
// left behind (its removal failed): removed now. (One placed on another
// node that d did not move may be a move into n in flight: left alone.)
func (s *Server) scanDrained(ctx context.Context, n store.Node, d store.DrainState) error {
	sbs, err := s.liveOn(ctx, n)
	if err != nil {
		return err
	}
	moved := map[string]bool{}
	for _, m := range d.Moves {
		moved[m.Sandbox] = m.State == store.MoveMoved
	}
	found := make([]store.Found, 0, len(sbs))
	for _, sb := range sbs {
		p, err := s.st.Lookup(ctx, sb.ID)
		switch {
		case err == nil && p.Node.ID != n.ID && p.State == store.Placed && moved[sb.ID]:
			if err := s.removeMoved(ctx, n, sb.ID); err != nil {
				s.log.Warn("removing a moved sandbox's copy left behind", "op", "cluster", "sandbox", sb.ID, "node", n.ID, "err", err)
			}
			continue
		case err == nil && p.Node.ID != n.ID:
			continue // placed elsewhere: not this node's to move
		case errors.Is(err, errdefs.ErrNotFound):
			found = append(found, store.Found{Sandbox: sb.ID, Stuck: "not placed through a control plane (the cluster does not know it)"})
			continue
		case err != nil:
			return err
		}
		found = append(found, store.Found{Sandbox: sb.ID, Stuck: unmovable(sb)})
	}
	return s.st.ScanDrain(ctx, n.ID, found)
}

// liveOn lists node n's paused and running sandboxes.
func (s *Server) liveOn(ctx context.Context, n store.Node) ([]apiv1.Sandbox, error) {
	var out []apiv1.Sandbox
	next := ""
	for {
		q := url.Values{"state": {"paused,running"}, "limit": {"1000"}}
		if next != "" {
			q.Set("next", next)
		}
		var l apiv1.SandboxList
		if err := s.getOnNode(ctx, n, "/v1/sandboxes?"+q.Encode(), &l); err != nil {
			return nil, err
		}
		out = append(out, l.Sandboxes...)
		if l.Next == "" || len(l.Sandboxes) == 0 {
			return out, nil
		}
		next = l.Next
	}
}

// unmovable says why sandbox sb cannot be moved as it is ("": it can).
func unmovable(sb apiv1.Sandbox) string {
	switch {
	case sb.State == "running":
		return "running: a drain moves paused sandboxes only (pause it to have it moved)"
	case sb.State != "paused":
		return fmt.Sprintf("%s: a drain moves paused sandboxes only", sb.State)
	case sb.PauseKind == "filesystem":
		return "paused filesystem-only: its files are an image of this node, which a drain does not move"
	case len(sb.Volumes) > 0:
		return "it mounts volumes, which memory snapshots refuse"
	case len(sb.Entrypoint) > 0:
		return "it has an entrypoint, whose end would no longer end it once moved"
	}
	return ""
}

// toAPIDrain is a draining node's progress as the API reports it.
func toAPIDrain(d store.DrainState) *apiv1.DrainProgress {
	p := &apiv1.DrainProgress{Scanned: d.Scanned, Moved: []apiv1.DrainSandbox{}, NotMoved: []apiv1.DrainSandbox{}}
	for _, m := range d.Moves {
		switch m.State {
		case store.MovePending, store.MoveMoving:
			p.ToMove++
		case store.MoveMoved:
			p.Moved = append(p.Moved, apiv1.DrainSandbox{ID: m.Sandbox, Node: m.Target})
		default:
			p.NotMoved = append(p.NotMoved, apiv1.DrainSandbox{ID: m.Sandbox, Reason: m.Reason})
		}
	}
	p.Done = p.Scanned && p.ToMove == 0
	return p
}
