package api

import (
	"net/http"

	"corral/internal/netpolicy/policy"
	"corral/pkg/apiv1"
)

// policyOf converts the wire policy; the result is normalized by the
// manager, whose errors name the field.
func policyOf(n apiv1.NetworkPolicy) (policy.Policy, error) {
	cidrs, err := policy.ParseCIDRs(n.CIDRAllowlist)
	if err != nil {
		return policy.Policy{}, err
	}
	return policy.Policy{BlockNetwork: n.BlockNetwork, CIDRAllowlist: cidrs, DomainAllowlist: n.DomainAllowlist}, nil
}

func networkOf(p policy.Policy) apiv1.NetworkPolicy {
	out := apiv1.NetworkPolicy{BlockNetwork: p.BlockNetwork, DomainAllowlist: p.DomainAllowlist}
	for _, c := range p.CIDRAllowlist {
		out.CIDRAllowlist = append(out.CIDRAllowlist, c.String())
	}
	return out
}

// setNetwork replaces a running sandbox's network policy; it takes effect
// without a restart.
func (s *Server) setNetwork(w http.ResponseWriter, r *http.Request) {
	var req apiv1.NetworkPolicy
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	p, err := policyOf(req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	sb, err := s.m.SetNetwork(r.Context(), r.PathValue("id"), p)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toAPI(sb))
}
