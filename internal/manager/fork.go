package manager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// MaxFork bounds the copies of one fork.
const MaxFork = 16

// ForkedFromTag is the tag a fork's copies carry, naming their parent.
const ForkedFromTag = "corral.forked_from"

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
	rec, err := s.Take(ctx, id, "")
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
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			copies[i], errs[i] = m.Create(ctx, sandbox.Spec{FromSnapshot: rec.ID, Tags: tags})
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
	m.event(id, "fork", fmt.Sprintf("forked into %d copies", n), map[string]string{"copies": fmt.Sprint(ids)})
	return copies, nil
}
