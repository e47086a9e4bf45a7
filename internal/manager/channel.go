package manager

import (
	"context"
	"time"

	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// reconnectTimeout (a variable for tests) bounds the reconnect to an agent whose connection
// dropped (and the runtime status checks around it): with the agent
// client's health check (agentapi.PingAfter + PingTimeout), a silenced
// agent ends its sandbox within about 30 s.
var reconnectTimeout = 10 * time.Second

// channelOwned reports whether the sandbox's agent channel is the
// watcher's to judge: the sandbox runs, no snapshot or pause ended the
// session on purpose, and the daemon is not stopping.
func (m *Manager) channelOwned(h *handle.Handle) bool {
	return !h.Quieted() && h.State() == sandbox.Running && !h.Detached() && m.ctx.Err() == nil
}

// stillRuns asks the runtime again whether the sandbox runs: an agent
// that could not be reached because the sandbox was dying is a crash, not
// a lost channel.
func (m *Manager) stillRuns(h *handle.Handle) bool {
	ctx, cancel := context.WithTimeout(m.ctx, reconnectTimeout)
	defer cancel()
	st, err := h.Runtime().Status(ctx, h.Ref())
	return err == nil && st == runtime.StateRunning
}

// channelLost ends a sandbox that still runs but whose agent channel was
// hijacked or silenced from inside: its agent's socket replaced, the
// agent stopped, or something else answering in its place. The event
// agent_channel_lost says what was seen (seen, and the extra fields).
func (m *Manager) channelLost(h *handle.Handle, seen string, extra map[string]string) {
	fields := map[string]string{"seen": seen, "runtime_state": string(runtime.StateRunning)}
	for k, v := range extra {
		fields[k] = v
	}
	m.log.Warn("agent channel hijacked or silenced; ending the sandbox", "sandbox", h.ID(), "seen", seen)
	h.Milestone(sandbox.EndAgentChannelLost, "the sandbox's agent channel was hijacked or silenced from inside; ending it", fields)
	m.terminateAsync(h.ID(), sandbox.EndAgentChannelLost, nil)
}

// agentGoneReason is the end reason and event of a sandbox whose agent
// could not be reached (err) where one was expected: agent_channel_lost
// while the runtime still runs it, crashed otherwise.
func (m *Manager) agentGoneReason(h *handle.Handle) string {
	if m.stillRuns(h) {
		return sandbox.EndAgentChannelLost
	}
	return sandbox.EndCrashed
}
