package manager

import (
	"context"
	"fmt"

	"corral/internal/errdefs"
	"corral/internal/netpolicy/policy"
	"corral/internal/sandbox"
)

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
func (m *Manager) networkEnabled() bool { return false }

// SetNetwork replaces a running sandbox's network policy.
func (m *Manager) SetNetwork(ctx context.Context, id string, p policy.Policy) (*sandbox.Sandbox, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	if _, err := m.effectiveNetwork(p); err != nil {
		return nil, err
	}
	if !p.BlockNetwork {
		return nil, fmt.Errorf("%w: network: this daemon runs sandboxes without networking; only block_network applies", errdefs.ErrNotSupported)
	}
	_, l, release, err := m.agentFor(id)
	if err != nil {
		return nil, err
	}
	defer release()
	return l.snapshot(), nil
}
