package manager

import (
	"context"
	"fmt"
	"time"

	"corral/internal/errdefs"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// pauseTimeout bounds a pause or resume the daemon starts itself (idle
// pause, auto-resume).
const pauseTimeout = 5 * time.Minute

// liveOf returns the live side of sandbox id: ErrNotFound for an unknown
// one, ErrFailedPrecondition for one that has ended.
func (m *Manager) liveOf(id string) (*live, error) {
	if !sandbox.ValidID(id) {
		return nil, fmt.Errorf("%w: sandbox %q", errdefs.ErrNotFound, id)
	}
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	if l == nil {
		if _, err := m.store.GetSandbox(context.Background(), id); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: sandbox %s has ended", errdefs.ErrFailedPrecondition, id)
	}
	return l, nil
}

// pauser returns the sandbox's live side and its runtime's Pauser.
func (m *Manager) pauser(id string) (*live, runtime.Pauser, error) {
	l, err := m.liveOf(id)
	if err != nil {
		return nil, nil, err
	}
	p, ok := l.rt.(runtime.Pauser)
	if !ok {
		return nil, nil, fmt.Errorf("%w: runtime %s cannot pause sandboxes", errdefs.ErrNotSupported, l.rt.Name())
	}
	return l, p, nil
}

// Pause saves a running sandbox to disk, freeing its CPU and memory; it
// keeps its id, files, processes, network policy and exposed ports, and
// its paused time does not count against its timeout.
func (m *Manager) Pause(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	l, p, err := m.pauser(id)
	if err != nil {
		return nil, err
	}
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	client := l.client
	l.mu.Unlock()
	// Paused before the agent connection goes, so the watcher does not
	// take its end for a crash.
	rec, err := l.move(sandbox.Paused, func(s *sandbox.Sandbox) { s.PausedAt = time.Now().UTC() })
	if err != nil {
		return nil, err
	}
	if client != nil {
		if err := client.EndSession(ctx); err != nil {
			m.log.Warn("ending the agent session before a pause", "sandbox", id, "err", err)
		}
	}
	l.mu.Lock()
	l.client = nil
	l.mu.Unlock()
	if err := p.Pause(ctx, l.ref); err != nil {
		m.log.Error("pausing failed; reconnecting", "sandbox", id, "err", err)
		if _, rerr := m.resumeLocked(ctx, l, false); rerr != nil {
			m.terminateAsync(id, sandbox.EndCrashed, nil)
		}
		return nil, fmt.Errorf("pausing sandbox %s: %w", id, err)
	}
	if err := m.store.PutSandbox(ctx, rec); err != nil {
		return nil, err
	}
	m.event(id, "paused", "sandbox paused", nil)
	return l.snapshot(), nil
}

// Resume brings a paused sandbox back.
func (m *Manager) Resume(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	l, p, err := m.pauser(id)
	if err != nil {
		return nil, err
	}
	l.op.Lock()
	defer l.op.Unlock()
	if st := l.state(); st != sandbox.Paused {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not paused", errdefs.ErrFailedPrecondition, id, st)
	}
	if err := p.Resume(ctx, l.ref); err != nil {
		return nil, fmt.Errorf("resuming sandbox %s: %w", id, err)
	}
	return m.resumeLocked(ctx, l, true)
}

// resumeLocked reconnects to the agent of a sandbox that runs again and
// moves it to running; the caller holds l.op.
func (m *Manager) resumeLocked(ctx context.Context, l *live, announce bool) (*sandbox.Sandbox, error) {
	client, err := m.connect(ctx, l)
	if err != nil {
		return nil, err
	}
	rec, err := l.move(sandbox.Running, func(s *sandbox.Sandbox) {
		if !s.PausedAt.IsZero() {
			s.PausedFor += time.Since(s.PausedAt)
		}
		s.PausedAt = time.Time{}
	})
	if err != nil {
		client.Close()
		return nil, err
	}
	l.mu.Lock()
	l.client = client
	l.lastActive = time.Now()
	l.mu.Unlock()
	if err := m.store.PutSandbox(ctx, rec); err != nil {
		return nil, err
	}
	if announce {
		m.event(l.ref.ID, "resumed", "sandbox resumed", map[string]string{"paused_for": rec.PausedFor.String()})
	}
	m.watch(l, client)
	return l.snapshot(), nil
}
