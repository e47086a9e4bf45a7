// Package policy is the contract of Corral's per-sandbox network policy:
// what a sandbox may reach, the ranges that are always denied, and the
// decision record every enforcement point (nftables rules, the DNS
// resolver, the egress proxy) produces. It imports nothing from Corral but
// errdefs, so every part of the network layer can share it.
package policy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"corral/internal/errdefs"
)

// Bounds of a policy.
const (
	MaxCIDRs   = 256
	MaxDomains = 256
)

// Policy is what one sandbox may reach. The zero value is the default:
// egress to public addresses, internal ranges denied.
type Policy struct {
	// BlockNetwork: nothing in or out (the agent channel is not network).
	BlockNetwork bool `json:"block_network,omitempty"`
	// CIDRAllowlist, when not empty, limits egress to these ranges (still
	// minus the always-denied ranges unless the operator allowed them).
	CIDRAllowlist []netip.Prefix `json:"cidr_allowlist,omitempty"`
	// DomainAllowlist, when not empty, limits egress to these names
	// (exact, or "*.example.com" for subdomains), enforced on DNS answers
	// and on TLS SNI / HTTP Host at the egress proxy.
	DomainAllowlist []string `json:"domain_allowlist,omitempty"`
}

// Normalize validates p and puts it in canonical form (sorted, masked,
// lowercase, deduplicated). Errors name the field.
func (p *Policy) Normalize() error {
	if p.BlockNetwork && (len(p.CIDRAllowlist) > 0 || len(p.DomainAllowlist) > 0) {
		return errdefs.Invalid("block_network", "cannot be combined with an allowlist")
	}
	if len(p.CIDRAllowlist) > MaxCIDRs {
		return errdefs.Invalid("cidr_allowlist", "at most %d ranges, got %d", MaxCIDRs, len(p.CIDRAllowlist))
	}
	if len(p.DomainAllowlist) > MaxDomains {
		return errdefs.Invalid("domain_allowlist", "at most %d names, got %d", MaxDomains, len(p.DomainAllowlist))
	}
	seen := map[netip.Prefix]bool{}
	var cidrs []netip.Prefix
	for _, c := range p.CIDRAllowlist {
		if !c.IsValid() {
			return errdefs.Invalid("cidr_allowlist", "invalid range %v", c)
		}
		c = c.Masked()
		if !seen[c] {
			seen[c] = true
			cidrs = append(cidrs, c)
		}
	}
	sort.Slice(cidrs, func(i, j int) bool { return cidrs[i].String() < cidrs[j].String() })
	p.CIDRAllowlist = cidrs
	names := map[string]bool{}
	var domains []string
	for _, d := range p.DomainAllowlist {
		n, err := NormalizeDomain(d)
		if err != nil {
			return err
		}
		if !names[n] {
			names[n] = true
			domains = append(domains, n)
		}
	}
	sort.Strings(domains)
	p.DomainAllowlist = domains
	return nil
}

// ParseCIDRs parses ranges; a bare address is a /32 or /128.
func ParseCIDRs(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, errdefs.Invalid("cidr_allowlist", "%q is not an address or range", s)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, errdefs.Invalid("cidr_allowlist", "%q is not a range: %v", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// NormalizeDomain lowercases and checks a DNS name or "*.suffix" pattern.
func NormalizeDomain(d string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
	wild := strings.HasPrefix(n, "*.")
	host := strings.TrimPrefix(n, "*.")
	if len(host) == 0 || len(host) > 253 {
		return "", errdefs.Invalid("domain_allowlist", "%q is not a domain name", d)
	}
	for _, label := range strings.Split(host, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", errdefs.Invalid("domain_allowlist", "%q is not a domain name", d)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", errdefs.Invalid("domain_allowlist", "%q is not a domain name", d)
			}
		}
	}
	if wild {
		return "*." + host, nil
	}
	return host, nil
}

// AllowsName reports whether a DNS name (no trailing dot) matches the
// domain allowlist. With no domain allowlist every name is allowed unless
// the network is blocked.
func (p Policy) AllowsName(name string) bool {
	if p.BlockNetwork {
		return false
	}
	if len(p.DomainAllowlist) == 0 {
		return true
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, d := range p.DomainAllowlist {
		if suffix, ok := strings.CutPrefix(d, "*."); ok {
			if strings.HasSuffix(name, "."+suffix) {
				return true
			}
		} else if name == d {
			return true
		}
	}
	return false
}

// Decision is one egress (or exposed-port) decision, for the event log.
type Decision struct {
	Time      time.Time
	SandboxID string
	Allowed   bool
	Proto     string     // "tcp", "udp", "icmp", "dns"
	Dst       netip.Addr // destination address (zero for a DNS query)
	Port      uint16
	Domain    string // the name, when known (DNS query, SNI, Host)
	Reason    string // why: "internal range", "not in cidr_allowlist", ...
	Via       string // enforcement point: "nftables", "dns", "proxy"
	// Limit, on a refusal by a fair-share bound of the resolver or the
	// proxy, names the bound ("per_sandbox" or "shared") and LimitMax its
	// size; Refused counts the refusals the decision reports (they are
	// reported at most once a second per sandbox and bound).
	Limit    string
	LimitMax int
	Refused  int
	// Rcode, on a forwarded DNS query, is the answer's response code when
	// it is not NOERROR ("NXDOMAIN": the name does not exist; "SERVFAIL":
	// it could not be resolved), so a name that did not resolve is not
	// shown as a plain "allowed".
	Rcode string
}

// RcodeMeaning says what a DNS response code means, for an event.
func RcodeMeaning(rcode string) string {
	switch rcode {
	case "NXDOMAIN":
		return "NXDOMAIN, the name does not exist"
	case "SERVFAIL":
		return "SERVFAIL, the name could not be resolved"
	}
	return rcode
}

func (d Decision) String() string {
	verdict := "denied"
	if d.Allowed {
		verdict = "allowed"
	}
	s := fmt.Sprintf("%s %s", verdict, d.Proto)
	if d.Dst.IsValid() {
		s += " " + netip.AddrPortFrom(d.Dst, d.Port).String()
	}
	if d.Domain != "" {
		s += " (" + d.Domain + ")"
	}
	if d.Rcode != "" {
		s += ": " + RcodeMeaning(d.Rcode)
	}
	if d.Reason != "" {
		s += ": " + d.Reason
	}
	return s
}

// Lookup maps a source address to its sandbox and that sandbox's current
// policy. The resolver and the egress proxy call it for every query and
// connection, so a policy change takes effect on the next one.
type Lookup func(src netip.Addr) (sandboxID string, p Policy, ok bool)

// Decide receives decisions for the sandbox's event log. It runs on the
// query or connection path and must not block.
type Decide func(Decision)
