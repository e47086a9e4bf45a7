package manager

import (
	"context"
	"fmt"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// pauseTimeout bounds a pause or resume the daemon starts itself (idle
// pause, auto-resume).
const pauseTimeout = 5 * time.Minute

// pauser returns the sandbox's handle and its runtime's Pauser.
func (m *Manager) pauser(ctx context.Context, id string) (*handle.Handle, runtime.Pauser, error) {
	h, err := m.live(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	p, ok := h.Runtime().(runtime.Pauser)
	if !ok {
		return nil, nil, fmt.Errorf("%w: runtime %s cannot pause sandboxes", errdefs.ErrNotSupported, h.Runtime().Name())
	}
	if err := refuseWithVolumes(h.Record(), "paused"); err != nil {
		return nil, nil, err
	}
	return h, p, nil
}

// Pause saves a running sandbox to disk, freeing its CPU and memory; it
// keeps its id, files, processes, network policy and exposed ports, and
// its paused time does not count against its timeout.
func (m *Manager) Pause(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	h, p, err := m.pauser(ctx, id)
	if err != nil {
		return nil, err
	}
	h.Lock()
	defer h.Unlock()
	// Paused before the agent connection goes, so the watcher does not
	// take its end for a crash. (A daemon that dies before the save
	// finds the record paused and the sandbox running, and adopts it as
	// running: reconcile.)
	rec, err := h.Apply(ctx, handle.Change{To: sandbox.Paused, Edit: func(s *sandbox.Sandbox) {
		s.PausedAt, s.PauseKind = time.Now().UTC(), sandbox.PauseMemory
	}})
	if err != nil {
		return nil, err
	}
	m.letGo(ctx, h)
	if err := p.Pause(ctx, h.Ref()); err != nil {
		m.log.ErrorContext(ctx, "pausing failed; reconnecting", "sandbox", id, "err", err)
		if _, rerr := m.resumeLocked(ctx, h, false); rerr != nil {
			m.terminateAsync(id, sandbox.EndCrashed, nil)
		}
		return nil, fmt.Errorf("pausing sandbox %s: %w", id, err)
	}
	h.Milestone("paused", "sandbox paused", nil)
	return rec, nil
}

// letGo ends the agent session of a sandbox being paused (either kind)
// and takes its last usage reading; the caller holds h's lock and has
// recorded the pause, so the watcher does not take the agent's end for a
// crash.
func (m *Manager) letGo(ctx context.Context, h *handle.Handle) {
	if client := h.SetAgent(nil); client != nil {
		if err := client.EndSession(ctx); err != nil {
			m.log.WarnContext(ctx, "ending the agent session before a pause", "sandbox", h.ID(), "err", err)
		}
		client.Close()
	}
	m.meterPausing(h)
}

// Resume brings a paused sandbox back.
func (m *Manager) Resume(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	h, p, err := m.pauser(ctx, id)
	if err != nil {
		return nil, err
	}
	h.Lock()
	defer h.Unlock()
	if st := h.State(); st != sandbox.Paused {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not paused", errdefs.ErrFailedPrecondition, id, st)
	}
	if h.Record().PauseKind == sandbox.PauseFilesystem {
		return m.resumeFilesystem(ctx, h)
	}
	if err := p.Resume(ctx, h.Ref()); err != nil {
		return nil, fmt.Errorf("resuming sandbox %s: %w", id, err)
	}
	m.meterResumed(h, false)
	return m.resumeLocked(ctx, h, true)
}

// resumeLocked reconnects to the agent of a sandbox that runs again and
// moves it to running; the caller holds h's lock.
func (m *Manager) resumeLocked(ctx context.Context, h *handle.Handle, announce bool) (*sandbox.Sandbox, error) {
	client, err := h.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return m.resumedLocked(ctx, h, client, announce)
}

// resumedLocked moves a sandbox that runs again, its agent connected
// (client), to running; the caller holds h's lock.
func (m *Manager) resumedLocked(ctx context.Context, h *handle.Handle, client *agentapi.Client, announce bool) (*sandbox.Sandbox, error) {
	ch := handle.Change{To: sandbox.Running, Edit: func(s *sandbox.Sandbox) {
		if !s.PausedAt.IsZero() {
			s.PausedFor += time.Since(s.PausedAt)
		}
		s.PausedAt, s.PauseKind = time.Time{}, ""
		// A sandbox paused because its lifetime ended (pause_on_timeout)
		// runs again for a fresh Timeout.
		if now := time.Now(); s.Spec.PauseOnTimeout && !s.ExpiresAt().After(now) {
			s.SetRemaining(now, s.Spec.Timeout, false)
		}
	}}
	if announce {
		ch.Event = &handle.Event{Kind: "resumed", Message: "sandbox resumed"}
	}
	rec, err := h.Apply(ctx, ch)
	if err != nil {
		client.Close()
		return nil, err
	}
	h.SetAgent(client)
	h.Touch()
	m.watch(h)
	return rec, nil
}
