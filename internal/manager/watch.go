package manager

import (
	"context"
	"time"

	"corral/internal/agentapi"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// idleCheck is how often idle timeouts are evaluated.
const idleCheck = time.Second

// oomPollTicks is how many idleCheck ticks lie between two reads of a
// sandbox's OOM kill count (a cgroup lookup each): an exec that ends
// killed reads it at once (oom.go), so only a background process's kill
// waits for the poll.
const oomPollTicks = 5

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
		m.watchLoop(h, client)
	}()
}

func (m *Manager) watchLoop(h *handle.Handle, client *agentapi.Client) {
	agentGone := client.Done()
	rec := h.Record()
	expiry := time.NewTimer(time.Until(rec.ExpiresAt()))
	defer expiry.Stop()
	tick := time.NewTicker(idleCheck)
	defer tick.Stop()
	ticks := 0
	for {
		select {
		case <-h.Stopped():
			return
		case <-m.ctx.Done():
			return
		case <-h.Lifetime():
			rec = h.Record()
			expiry.Reset(time.Until(rec.ExpiresAt()))
		case <-expiry.C:
			fields := map[string]string{"timeout": rec.Spec.Timeout.String(), "expires_at": rec.ExpiresAt().Format(time.RFC3339Nano)}
			if rec.Spec.PauseOnTimeout {
				m.timeoutPause(h, fields)
				return
			}
			h.Milestone("timeout", "lifetime timeout reached", fields)
			m.terminateAsync(rec.ID, sandbox.EndTimeout, nil)
			return
		case <-tick.C:
			m.rotateLogs(h)
			if ticks++; ticks%oomPollTicks == 0 {
				m.checkOOM(h)
			}
			if err := client.CheckChannel(); err != nil && m.channelOwned(h) {
				m.channelLost(h, err.Error(), nil)
				return
			}
			if it := rec.Spec.IdleTimeout; it > 0 && h.IdleFor(time.Now()) >= it {
				if rec.Spec.AutoPause {
					m.idlePause(h, it)
					return
				}
				h.Milestone("idle_timeout", "idle timeout reached", map[string]string{"idle_timeout": it.String()})
				m.terminateAsync(rec.ID, sandbox.EndIdleTimeout, nil)
				return
			}
		case <-agentGone:
			m.agentLost(h, client)
			return
		}
	}
}

// agentLost handles a dropped agent connection: if the sandbox is gone it
// crashed; if it still runs, reconnect once, and when that fails too the
// channel was hijacked or silenced from inside (channelLost).
func (m *Manager) agentLost(h *handle.Handle, client *agentapi.Client) {
	if !m.channelOwned(h) {
		return
	}
	seen := "connection lost"
	if err := client.Err(); err != nil {
		seen = err.Error()
	}
	ctx, cancel := context.WithTimeout(m.ctx, reconnectTimeout)
	defer cancel()
	st, err := h.Runtime().Status(ctx, h.Ref())
	if err == nil && st == runtime.StateRunning {
		next, cerr := h.Connect(ctx)
		if cerr == nil {
			h.SetAgent(next)
			if err := m.serveVolumesNFS(h, next, h.Record().Spec); err != nil {
				m.log.Error("serving volumes again after a reconnect", "sandbox", h.ID(), "err", err)
			}
			m.cfg.Telemetry.AgentReconnected()
			m.log.Warn("agent connection lost; reconnected", "sandbox", h.ID(), "seen", seen)
			h.Event("agent_reconnected", "the agent's connection dropped while the sandbox ran; reconnected",
				map[string]string{"seen": seen})
			m.watch(h)
			return
		}
		if m.stillRuns(h) {
			m.channelLost(h, seen, map[string]string{"reconnect": cerr.Error()})
			return
		}
		st = runtime.StateStopped
	}
	m.crashed(h, st, seen)
}

// crashed ends a sandbox whose agent went away with its runtime no longer
// running it: for the cause the runtime names (out of memory, a guest
// panic or power-off), or as crashed when it names none.
func (m *Manager) crashed(h *handle.Handle, st runtime.State, seen string) {
	fields := map[string]string{"runtime_state": string(st), "seen": seen}
	reason, detail := m.endCause(h)
	if reason == sandbox.EndCrashed {
		h.Milestone("crashed", "sandbox agent is gone", fields)
	} else {
		h.SetEndDetail(detail)
		h.Milestone(reason, detail, fields)
	}
	m.terminateAsync(h.ID(), reason, nil)
}

// endCause asks the sandbox's runtime why it ended (runtime.EndCauser):
// the end reason and its detail; EndCrashed when the runtime cannot tell.
func (m *Manager) endCause(h *handle.Handle) (string, string) {
	ec, ok := h.Runtime().(runtime.EndCauser)
	if !ok {
		return sandbox.EndCrashed, ""
	}
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	cause, detail := ec.EndCause(ctx, h.Ref())
	switch cause {
	case runtime.CauseOOM:
		return sandbox.EndOOM, detail
	case runtime.CausePanic:
		return sandbox.EndPanic, detail
	case runtime.CausePowerOff:
		return sandbox.EndPowerOff, detail
	}
	return sandbox.EndCrashed, ""
}

// idlePause pauses a sandbox with auto_pause that was idle for it; the
// next API call on it resumes it (acquire). A sandbox that cannot be
// paused ends as an idle timeout would.
func (m *Manager) idlePause(h *handle.Handle, it time.Duration) {
	h.Milestone("idle_timeout", "idle timeout reached; pausing", map[string]string{"idle_timeout": it.String()})
	ctx, cancel := context.WithTimeout(m.ctx, pauseTimeout)
	defer cancel()
	if _, err := m.Pause(ctx, h.ID()); err != nil {
		m.log.Warn("pausing an idle sandbox failed; ending it", "sandbox", h.ID(), "err", err)
		if h.State() == sandbox.Running {
			m.terminateAsync(h.ID(), sandbox.EndIdleTimeout, nil)
		}
	}
}

// timeoutPause pauses a sandbox with pause_on_timeout whose lifetime
// ended; resuming it gives it a fresh lifetime (resumeLocked). A sandbox
// that cannot be paused ends as a timeout would.
func (m *Manager) timeoutPause(h *handle.Handle, fields map[string]string) {
	h.Milestone("timeout", "lifetime timeout reached; pausing", fields)
	ctx, cancel := context.WithTimeout(m.ctx, pauseTimeout)
	defer cancel()
	o := PauseOptions{Filesystem: h.Record().Spec.PauseFilesystem}
	if _, err := m.PauseWith(ctx, h.ID(), o); err != nil {
		m.log.Warn("pausing a sandbox at its timeout failed; ending it", "sandbox", h.ID(), "err", err)
		if h.State() == sandbox.Running {
			m.terminateAsync(h.ID(), sandbox.EndTimeout, nil)
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
