package handle

import (
	"context"
	"net"

	"corral/internal/agentapi"
)

// Connect dials the sandbox's agent through its runtime and negotiates the
// protocol, within the host's AgentTimeout. It does not install the
// client (SetAgent does).
func (h *Handle) Connect(ctx context.Context) (*agentapi.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, h.host.AgentTimeout)
	defer cancel()
	return agentapi.Connect(ctx, func(ctx context.Context) (net.Conn, error) { return h.rt.Dial(ctx, h.ref) })
}

// SetAgent installs c as the sandbox's agent connection (nil: none) and
// returns the one it replaces, which the caller closes if it still needs
// to.
func (h *Handle) SetAgent(c *agentapi.Client) *agentapi.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.agent
	h.agent = c
	return old
}

// Agent is the installed agent connection, or nil.
func (h *Handle) Agent() *agentapi.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agent
}

// Quiet marks (or unmarks) that the agent session is being ended on
// purpose (a memory snapshot): the watcher takes the connection's end for
// that, not for a crash.
func (h *Handle) Quiet(on bool) {
	h.mu.Lock()
	h.quiet = on
	h.mu.Unlock()
}

// Watch records that the manager watches the sandbox (timeouts, agent
// loss); a sandbox waiting in a warm pool is not watched until it is
// claimed.
func (h *Handle) Watch() {
	h.mu.Lock()
	h.watched = true
	h.mu.Unlock()
}

// Watched reports whether Watch was called.
func (h *Handle) Watched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watched
}

// Quieted reports whether Quiet is on.
func (h *Handle) Quieted() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.quiet
}
