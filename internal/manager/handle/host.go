package handle

import (
	"context"
	"log/slog"
	"time"

	imagestore "corral/internal/image/store"
	"corral/internal/netpolicy"
	"corral/internal/records"
	"corral/internal/sandboxlog"
)

// Host is what every handle of one daemon shares: where records and
// events go, and the owners of the host resources a teardown releases.
type Host struct {
	Records *records.Store
	// Trail writes the events and audit entries of sandboxes, within each
	// sandbox's budget.
	Trail *sandboxlog.Writer
	Log   *slog.Logger
	// Network holds sandboxes' namespaces, devices and rules; nil when
	// sandboxes have no network. ForgetDNS, if set, drops a sandbox's
	// resolver state.
	Network   *netpolicy.Network
	ForgetDNS func(id string)
	// Images holds image leases; nil when the daemon has no image store.
	Images *imagestore.Store
	// AgentTimeout bounds one connect to an agent.
	AgentTimeout time.Duration
	// Lifetime is the daemon's lifetime context; events are written under
	// it, detached from any request.
	Lifetime context.Context
	// Settle, if set, is the first step of every teardown, while the
	// sandbox's processes, cgroup and link still exist: usage metering's
	// last reading and its record.
	Settle func(ctx context.Context, h *Handle)
}

// Event appends to sandbox id's event log (and the audit trail, for the
// kinds it keeps), within the sandbox's budget: past it, the event is
// folded into a count (sandboxlog).
func (h *Host) Event(id, kind, msg string, fields map[string]string) {
	h.Trail.Event(h.Lifetime, id, kind, msg, fields)
}

// Milestone appends a state move of sandbox id to its event log, whatever
// its budget holds.
func (h *Host) Milestone(id, kind, msg string, fields map[string]string) {
	h.Trail.Milestone(h.Lifetime, id, kind, msg, fields)
}
