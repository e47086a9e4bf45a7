package e2b

import (
	"net/http"
	"net/netip"

	"corral/internal/errdefs"
	"corral/internal/netpolicy/policy"
)

// allTraffic is E2B's ALL_TRAFFIC: denyOut holding it denies every
// destination allowOut does not name.
const allTraffic = "0.0.0.0/0"

// policyOf translates E2B's egress settings into a Corral policy:
//   - allow_internet_access false, or denyOut [0.0.0.0/0] with no
//     allowOut: no network at all (Corral cannot deny egress alone);
//   - denyOut [0.0.0.0/0] with allowOut: egress only to allowOut's
//     addresses, ranges and domain names;
//   - otherwise the daemon's default (internet allowed, private ranges
//     denied).
//
// denyOut of chosen ranges, egress proxies, rules, allowPublicTraffic,
// maskRequestHost and httpsPorts are refused by name.
func policyOf(allowInternet *bool, n *networkConfig) (policy.Policy, error) {
	var p policy.Policy
	if n == nil {
		n = &networkConfig{}
	}
	if n.AllowInternetAccess != nil {
		allowInternet = n.AllowInternetAccess
	}
	if err := refuseNetwork(n); err != nil {
		return p, err
	}
	denyAll := allowInternet != nil && !*allowInternet
	for _, d := range n.DenyOut {
		if d != allTraffic {
			return p, errdefs.Invalid("network.denyOut", "%q: Corral denies private ranges itself and can deny only all traffic (%s), not chosen ranges", truncate(d), allTraffic)
		}
		denyAll = true
	}
	if !denyAll {
		// allowOut takes precedence over denyOut: with nothing denied it
		// changes nothing.
		return p, nil
	}
	if len(n.AllowOut) == 0 {
		p.BlockNetwork = true
		return p, nil
	}
	for _, a := range n.AllowOut {
		if pfx, err := netip.ParsePrefix(a); err == nil {
			p.CIDRAllowlist = append(p.CIDRAllowlist, pfx)
		} else if addr, err := netip.ParseAddr(a); err == nil {
			p.CIDRAllowlist = append(p.CIDRAllowlist, netip.PrefixFrom(addr, addr.BitLen()))
		} else {
			p.DomainAllowlist = append(p.DomainAllowlist, a)
		}
	}
	if err := p.Normalize(); err != nil {
		return policy.Policy{}, errdefs.Invalid("network.allowOut", "%v", err)
	}
	return p, nil
}

// refuseNetwork names the network fields Corral cannot honour.
func refuseNetwork(n *networkConfig) error {
	switch {
	case len(n.EgressProxy) > 0 && string(n.EgressProxy) != "null":
		return errdefs.Invalid("network.egressProxy", "Corral has no egress proxy chaining")
	case len(n.Rules) > 0 && string(n.Rules) != "null" && string(n.Rules) != "{}":
		return errdefs.Invalid("network.rules", "Corral does not rewrite egress requests")
	case n.AllowPublicTraffic != nil:
		return errdefs.Invalid("network.allowPublicTraffic", "not supported: Corral's exposed ports take the sandbox's port token unless exposed as public")
	case n.MaskRequestHost != nil:
		return errdefs.Invalid("network.maskRequestHost", "not supported by Corral")
	case len(n.HTTPSPorts) > 0:
		return errdefs.Invalid("network.httpsPorts", "not supported by Corral")
	}
	return nil
}

// networkOut describes a policy as E2B's network info.
func networkOut(p policy.Policy) (*bool, *networkConfig) {
	allow := !p.BlockNetwork
	if p.BlockNetwork {
		return &allow, &networkConfig{DenyOut: []string{allTraffic}}
	}
	if len(p.CIDRAllowlist) == 0 && len(p.DomainAllowlist) == 0 {
		return &allow, nil
	}
	n := &networkConfig{DenyOut: []string{allTraffic}}
	for _, c := range p.CIDRAllowlist {
		n.AllowOut = append(n.AllowOut, c.String())
	}
	n.AllowOut = append(n.AllowOut, p.DomainAllowlist...)
	return &allow, n
}

// updateNetwork is PUT /sandboxes/{id}/network: the egress policy
// replaced as a whole.
func (s *Server) updateNetwork(w http.ResponseWriter, r *http.Request) {
	var req networkConfig
	if err := decode(w, r, &req, false); err != nil {
		s.writeError(w, err)
		return
	}
	p, err := policyOf(nil, &req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if _, err := s.liveSandbox(r); err != nil {
		s.writeError(w, err)
		return
	}
	if _, err := s.m.SetNetwork(r.Context(), r.PathValue("id"), p); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
