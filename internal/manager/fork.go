package manager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// MaxFork bounds the copies of one fork (E2B's maximum too); admission
// still refuses, all or nothing, what the host cannot hold.
const MaxFork = 100

// forkParallel bounds the copies of one fork restored at once: a hundred
// restores side by side would only queue on the host's cores and disk.
const forkParallel = 8

// ForkedFromTag is the tag a fork's copies carry, naming their parent.
const ForkedFromTag = ReservedTagPrefix + "forked_from"

// forkPrefix begins the name of a fork's own snapshot (removed before the
// fork answers), so that a daemon restarted while a fork ran knows the
// fork did not finish (endUnfinishedForks). No caller of Take may use the
// daemon's names (reservedPrefix).
const forkPrefix = reservedPrefix + "fork-"

// Fork starts n independent copies of the running sandbox id: a memory
// snapshot (removed once the copies run) restored n times, each copy with
// an identity of its own. All or nothing: if one copy fails, the others
// are removed.
func (s Snapshots) Fork(ctx context.Context, id string, n int) ([]*sandbox.Sandbox, error) {
	m := s.m
	if n < 1 || n > MaxFork {
		return nil, errdefs.Invalid("count", "want 1 to %d copies, got %d", MaxFork, n)
	}
	parent, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	rec, err := s.take(ctx, id, forkPrefix+randomHex(8))
	if err != nil {
		return nil, err
	}
	defer func() {
		if _, err := s.Remove(context.WithoutCancel(ctx), rec.ID); err != nil {
			m.log.Error("removing a fork's snapshot", "snapshot", rec.ID, "err", err)
		}
	}()
	tags := maps.Clone(parent.Spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[ForkedFromTag] = id
	copies := make([]*sandbox.Sandbox, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var failed atomic.Bool // all or nothing: once a copy fails, start no more
	slots := make(chan struct{}, forkParallel)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			if failed.Load() {
				return
			}
			if copies[i], errs[i] = m.Create(ctx, sandbox.Spec{FromSnapshot: rec.ID, Tags: tags}); errs[i] != nil {
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range copies {
			if c != nil {
				_, _ = m.Terminate(context.WithoutCancel(ctx), c.ID, sandbox.EndTerminated, nil)
			}
		}
		return nil, fmt.Errorf("forking sandbox %s: %w", id, err)
	}
	ids := make([]string, n)
	for i, c := range copies {
		ids[i] = c.ID
	}
	m.milestone(id, "fork", fmt.Sprintf("forked into %d copies", n), map[string]string{"copies": fmt.Sprint(ids)})
	return copies, nil
}

// endUnfinishedForks ends what a fork the daemon stopped in left behind:
// the copies started from its snapshot, which the fork's caller never
// learnt of (a fork is all or nothing), and the snapshot itself. It runs
// at start, once reconcile has adopted or ended every sandbox.
func (m *Manager) endUnfinishedForks(ctx context.Context, snaps []*sandbox.Snapshot) {
	for _, sn := range snaps {
		if !strings.HasPrefix(sn.Name, forkPrefix) {
			continue
		}
		for _, sb := range m.liveFrom(sn.ID) {
			m.log.Warn("ending a copy of an unfinished fork", "sandbox", sb.ID, "snapshot", sn.ID)
			m.milestone(sb.ID, sandbox.EndLost, "the daemon stopped before the fork of "+sn.SandboxID+
				" answered: a fork is all or nothing", map[string]string{"snapshot": sn.ID})
			if _, err := m.Terminate(ctx, sb.ID, sandbox.EndLost, nil); err != nil {
				m.log.Error("ending a copy of an unfinished fork", "sandbox", sb.ID, "err", err)
			}
		}
		m.log.Warn("removing the snapshot of an unfinished fork", "snapshot", sn.ID, "sandbox", sn.SandboxID)
		if _, err := m.snaps.Remove(ctx, sn.ID); err != nil {
			m.log.Error("removing the snapshot of an unfinished fork", "snapshot", sn.ID, "err", err)
		}
	}
}

// liveFrom returns the records of the live sandboxes started from
// snapshot id.
func (m *Manager) liveFrom(id string) []*sandbox.Sandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*sandbox.Sandbox
	for _, h := range m.handles {
		if rec := h.Record(); rec.Spec.FromSnapshot == id && !rec.State.Terminal() {
			out = append(out, rec)
		}
	}
	return out
}
