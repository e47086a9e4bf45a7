package manager

import (
	"context"
	"time"

	"corral/internal/agentapi"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// idleCheck is how often idle timeouts are evaluated.
const idleCheck = time.Second

// watch starts the background watchers of a running sandbox: lifetime
// timeout, idle timeout, and loss of the agent connection.
func (m *Manager) watch(l *live, client *agentapi.Client) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.watchLoop(l, client)
	}()
}

func (m *Manager) watchLoop(l *live, client *agentapi.Client) {
	sb := l.snapshot()
	expiry := time.NewTimer(time.Until(sb.ExpiresAt()))
	defer expiry.Stop()
	tick := time.NewTicker(idleCheck)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-m.ctx.Done():
			return
		case <-expiry.C:
			m.event(sb.ID, "timeout", "lifetime timeout reached", map[string]string{"timeout": sb.Spec.Timeout.String()})
			m.terminateAsync(sb.ID, sandbox.EndTimeout, nil)
			return
		case <-tick.C:
			if it := sb.Spec.IdleTimeout; it > 0 && l.idleFor(time.Now()) >= it {
				if sb.Spec.AutoPause {
					m.idlePause(l, it)
					return
				}
				m.event(sb.ID, "idle_timeout", "idle timeout reached", map[string]string{"idle_timeout": it.String()})
				m.terminateAsync(sb.ID, sandbox.EndIdleTimeout, nil)
				return
			}
		case <-client.Done():
			m.agentLost(l)
			return
		}
	}
}

// agentLost handles a dropped agent connection: if the sandbox is gone it
// crashed; if it still runs, reconnect once.
func (m *Manager) agentLost(l *live) {
	l.mu.Lock()
	saving := l.saving
	l.mu.Unlock()
	if saving {
		return // the snapshot reconnects and watches anew
	}
	if l.state() != sandbox.Running || l.detached() || m.ctx.Err() != nil {
		// The daemon is stopping (or the sandbox is being ended): the
		// connection went because we closed it, not because the sandbox
		// died. The next daemon adopts the sandbox.
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	st, err := l.rt.Status(ctx, l.ref)
	if err == nil && st == runtime.StateRunning {
		if client, err := m.connect(ctx, l); err == nil {
			l.mu.Lock()
			l.client = client
			l.mu.Unlock()
			m.log.Warn("agent connection lost; reconnected", "sandbox", l.ref.ID)
			m.watch(l, client)
			return
		}
	}
	m.event(l.ref.ID, "crashed", "sandbox agent is gone", map[string]string{"runtime_state": string(st)})
	m.terminateAsync(l.ref.ID, sandbox.EndCrashed, nil)
}

// idlePause pauses a sandbox with auto_pause that was idle for it; the
// next API call on it resumes it (agentFor). A sandbox that cannot be
// paused ends as an idle timeout would.
func (m *Manager) idlePause(l *live, it time.Duration) {
	id := l.ref.ID
	m.event(id, "idle_timeout", "idle timeout reached; pausing", map[string]string{"idle_timeout": it.String()})
	ctx, cancel := context.WithTimeout(m.ctx, pauseTimeout)
	defer cancel()
	if _, err := m.Pause(ctx, id); err != nil {
		m.log.Warn("pausing an idle sandbox failed; ending it", "sandbox", id, "err", err)
		if l.state() == sandbox.Running {
			m.terminateAsync(id, sandbox.EndIdleTimeout, nil)
		}
	}
}
