package manager

import (
	"context"
	"fmt"
	"net/netip"
	"time"

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

// maxPendingDecisions bounds the decisions waiting for the event log.
const maxPendingDecisions = 4096

// RecordDecision queues an egress decision for the sandbox's event log. It
// never blocks the packet path and never loses a decision: one past the
// sandbox's budget, or met by a full queue, is folded into the sandbox's
// count for its window (decisionlog.go), told by a limit_reached event.
func (m *Manager) RecordDecision(d policy.Decision) {
	if d.Limit == "" { // a fair-share refusal is a bound's, not a policy's
		m.cfg.Telemetry.Egress(d.Allowed, d.Via)
		if !m.declog.admit(d, time.Now()) {
			return
		}
	}
	select {
	case m.decisions <- d:
	default:
		m.declog.fold(d, time.Now())
	}
}

// writeDecisions drains the decision queue into the event log, and each
// second writes the folds of the windows that ended.
func (m *Manager) writeDecisions() {
	defer m.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			m.flushDecisions()
			return
		case now := <-tick.C:
			m.writeFolds(now)
		case d := <-m.decisions:
			m.writeDecision(d)
		}
	}
}

// flushDecisions writes, as the daemon stops, the decisions still queued
// and every window's folds, ended or not: nothing counted is lost.
func (m *Manager) flushDecisions() {
	for {
		select {
		case d := <-m.decisions:
			m.writeDecision(d)
		default:
			m.writeFolds(time.Now().Add(DecisionWindow))
			return
		}
	}
}

// writeFolds writes the limit_reached events of the fold windows ended
// by now.
func (m *Manager) writeFolds(now time.Time) {
	for _, r := range m.declog.due(now) {
		msg, f := r.event()
		m.event(r.sandbox, "limit_reached", msg, f)
	}
}

// writeDecision writes one decision (or a limit's refusal) as an event.
func (m *Manager) writeDecision(d policy.Decision) {
	if d.Limit != "" {
		m.limitEvent(d.SandboxID, resourceOf(d.Via), d.Limit, d.LimitMax, d.Refused)
		return
	}
	kind := "egress_denied"
	if d.Allowed {
		kind = "egress_allowed"
	}
	f := map[string]string{"proto": d.Proto, "via": d.Via}
	if d.Dst.IsValid() {
		f["dst"] = d.Dst.String()
		f["port"] = fmt.Sprint(d.Port)
	}
	if d.Domain != "" {
		f["domain"] = d.Domain
	}
	if d.Reason != "" {
		f["reason"] = d.Reason
	}
	if d.Rcode != "" {
		f["rcode"] = d.Rcode
	}
	if d.Time.IsZero() {
		d.Time = time.Now()
	}
	m.event(d.SandboxID, kind, d.String(), f)
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
