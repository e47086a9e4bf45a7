package manager

import (
	"context"
	"time"

	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// idleCheck is how often idle timeouts are evaluated.
const idleCheck = time.Second

// watch starts the background watcher of a running sandbox: lifetime
// timeout, idle timeout, and loss of its agent connection (the one
// installed now).
func (m *Manager) watch(h *handle.Handle) {
	client := h.Agent()
	if client == nil {
		return
	}
	h.Watch()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.watchLoop(h, client.Done())
	}()
}

func (m *Manager) watchLoop(h *handle.Handle, agentGone <-chan struct{}) {
	rec := h.Record()
	expiry := time.NewTimer(time.Until(rec.ExpiresAt()))
	defer expiry.Stop()
	tick := time.NewTicker(idleCheck)
	defer tick.Stop()
	for {
		select {
		case <-h.Stopped():
			return
		case <-m.ctx.Done():
			return
		case <-expiry.C:
			h.Event("timeout", "lifetime timeout reached", map[string]string{"timeout": rec.Spec.Timeout.String()})
			m.terminateAsync(rec.ID, sandbox.EndTimeout, nil)
			return
		case <-tick.C:
			m.rotateLogs(h)
			if it := rec.Spec.IdleTimeout; it > 0 && h.IdleFor(time.Now()) >= it {
				if rec.Spec.AutoPause {
					m.idlePause(h, it)
					return
				}
				h.Event("idle_timeout", "idle timeout reached", map[string]string{"idle_timeout": it.String()})
				m.terminateAsync(rec.ID, sandbox.EndIdleTimeout, nil)
				return
			}
		case <-agentGone:
			m.agentLost(h)
			return
		}
	}
}

// agentLost handles a dropped agent connection: if the sandbox is gone it
// crashed; if it still runs, reconnect once.
func (m *Manager) agentLost(h *handle.Handle) {
	if h.Quieted() {
		return // a snapshot ended the session; it reconnects and watches anew
	}
	if h.State() != sandbox.Running || h.Detached() || m.ctx.Err() != nil {
		// The daemon is stopping, or the sandbox is being paused or ended:
		// the connection went because we closed it, not because the sandbox
		// died. The next daemon adopts the sandbox.
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	st, err := h.Runtime().Status(ctx, h.Ref())
	if err == nil && st == runtime.StateRunning {
		if client, err := h.Connect(ctx); err == nil {
			h.SetAgent(client)
			m.log.Warn("agent connection lost; reconnected", "sandbox", h.ID())
			m.watch(h)
			return
		}
	}
	h.Event("crashed", "sandbox agent is gone", map[string]string{"runtime_state": string(st)})
	m.terminateAsync(h.ID(), sandbox.EndCrashed, nil)
}

// idlePause pauses a sandbox with auto_pause that was idle for it; the
// next API call on it resumes it (acquire). A sandbox that cannot be
// paused ends as an idle timeout would.
func (m *Manager) idlePause(h *handle.Handle, it time.Duration) {
	h.Event("idle_timeout", "idle timeout reached; pausing", map[string]string{"idle_timeout": it.String()})
	ctx, cancel := context.WithTimeout(m.ctx, pauseTimeout)
	defer cancel()
	if _, err := m.Pause(ctx, h.ID()); err != nil {
		m.log.Warn("pausing an idle sandbox failed; ending it", "sandbox", h.ID(), "err", err)
		if h.State() == sandbox.Running {
			m.terminateAsync(h.ID(), sandbox.EndIdleTimeout, nil)
		}
	}
}

// rotateLogs keeps the sandbox's host logs (console, serial) within their
// bounds, for runtimes that have such logs.
func (m *Manager) rotateLogs(h *handle.Handle) {
	lr, ok := h.Runtime().(runtime.LogRotator)
	if !ok {
		return
	}
	if err := lr.RotateLogs(h.Ref()); err != nil {
		m.log.Debug("rotating sandbox logs", "sandbox", h.ID(), "err", err)
	}
}
