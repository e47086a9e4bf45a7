package manager

import (
	"context"
	"fmt"
	"net/netip"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/manager/handle"
	"corral/internal/netpolicy"
	"corral/internal/netpolicy/policy"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// Networking is the network layer the manager drives: the kernel side
// (namespaces, veths, nftables) and the hook that drops a sandbox's
// resolver state when it goes.
type Networking struct {
	Layer  *netpolicy.Network
	Forget func(id string)
}

// effectiveNetwork decides the policy a new sandbox gets. Without a network
// layer a sandbox has no network at all, which is block_network: it says so
// rather than pretend, and refuses allowlists it could not enforce.
func (m *Manager) effectiveNetwork(p policy.Policy) (policy.Policy, error) {
	if m.networkEnabled() {
		return p, nil
	}
	if len(p.CIDRAllowlist) > 0 || len(p.DomainAllowlist) > 0 {
		return p, fmt.Errorf("%w: network: this daemon runs sandboxes without networking; allowlists cannot be honoured", errdefs.ErrNotSupported)
	}
	return policy.Policy{BlockNetwork: true}, nil
}

// networkEnabled reports whether sandboxes get a network namespace.
func (m *Manager) networkEnabled() bool { return m.cfg.Network != nil && m.cfg.Network.Layer != nil }

// attachNetwork gives a new sandbox its namespace and rules, and fills in
// the runtime's namespace path and resolver (nothing without networking).
func (m *Manager) attachNetwork(ctx context.Context, id string, p policy.Policy, params *runtime.StartParams) (*agentapi.IdentityNetwork, error) {
	if !m.networkEnabled() {
		return nil, nil
	}
	slot, err := m.cfg.Network.Layer.Attach(ctx, id, p)
	if err != nil {
		return nil, fmt.Errorf("attaching network: %w", err)
	}
	params.NetnsPath = slot.NetnsPath
	params.Nameservers = []string{slot.Gateway.String()}
	addr := netip.PrefixFrom(slot.Addr, slot.Prefix.Bits())
	return &agentapi.IdentityNetwork{Address: addr.String(), Gateway: slot.Gateway.String()}, nil
}

// SetNetwork replaces a running sandbox's network policy; it takes effect
// without a restart.
func (m *Manager) SetNetwork(ctx context.Context, id string, p policy.Policy) (*sandbox.Sandbox, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	if _, err := m.effectiveNetwork(p); err != nil {
		return nil, err
	}
	a, err := m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	defer a.release()
	if !m.networkEnabled() {
		if !p.BlockNetwork {
			return nil, fmt.Errorf("%w: network: this daemon runs sandboxes without networking; only block_network applies", errdefs.ErrNotSupported)
		}
		return a.rec, nil
	}
	a.h.Lock()
	defer a.h.Unlock()
	if err := m.cfg.Network.Layer.SetPolicy(ctx, id, p); err != nil {
		return nil, fmt.Errorf("sandbox %s: setting network policy: %w", id, err)
	}
	return a.h.Apply(ctx, handle.Change{
		Edit:  func(s *sandbox.Sandbox) { s.Spec.Network = p },
		Event: &handle.Event{Kind: "network_policy", Message: "network policy changed", Fields: policyFields(p)},
	})
}

func policyFields(p policy.Policy) map[string]string {
	f := map[string]string{"block_network": fmt.Sprint(p.BlockNetwork)}
	if len(p.CIDRAllowlist) > 0 {
		f["cidr_allowlist"] = fmt.Sprint(p.CIDRAllowlist)
	}
	if len(p.DomainAllowlist) > 0 {
		f["domain_allowlist"] = fmt.Sprint(p.DomainAllowlist)
	}
	return f
}

// RecordDecision records an egress decision in the sandbox's event log,
// within its budget (sandboxlog): it never blocks the packet path and
// never loses a decision (one past the budget is folded into a count).
func (m *Manager) RecordDecision(d policy.Decision) {
	if d.Limit == "" { // a fair-share refusal is a bound's, not a policy's
		m.cfg.Telemetry.Egress(d.Allowed, d.Via)
	}
	m.trail.Decision(d)
}

// Address returns the network address of the live sandbox id and its
// gateway (the daemon's side: default route and resolver); ok is false
// when it has none (no network, or ended).
func (m *Manager) Address(id string) (addr, gateway netip.Addr, ok bool) {
	if !m.networkEnabled() {
		return netip.Addr{}, netip.Addr{}, false
	}
	s, ok := m.cfg.Network.Layer.Slot(id)
	if !ok {
		return netip.Addr{}, netip.Addr{}, false
	}
	return s.Addr, s.Gateway, true
}
