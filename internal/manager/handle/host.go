package handle

import (
	"context"
	"log/slog"
	"time"

	imagestore "corral/internal/image/store"
	"corral/internal/netpolicy"
	"corral/internal/records"
)

// Host is what every handle of one daemon shares: where records and
// events go, and the owners of the host resources a teardown releases.
type Host struct {
	Records *records.Store
	Log     *slog.Logger
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
	// Audit, if set, sees every event once it is written, with the
	// context of the change that wrote it (which names the caller) or
	// Lifetime.
	Audit func(ctx context.Context, id, kind, msg string, fields map[string]string)
	// Settle, if set, is the first step of every teardown, while the
	// sandbox's processes, cgroup and link still exist: usage metering's
	// last reading and its record.
	Settle func(ctx context.Context, h *Handle)
}

// Event appends to sandbox id's event log; a failure is logged, not
// returned.
func (h *Host) Event(id, kind, msg string, fields map[string]string) {
	ev := records.Event{SandboxID: id, Kind: kind, Message: msg, Fields: fields}
	if err := h.Records.AppendEvent(context.WithoutCancel(h.Lifetime), ev); err != nil {
		h.Log.Warn("appending event", "sandbox", id, "kind", kind, "err", err)
	}
	if h.Audit != nil {
		h.Audit(h.Lifetime, id, kind, msg, fields)
	}
}
