package policy

import "net/netip"

// AlwaysDenied are the destinations no sandbox reaches unless the operator
// allows a range explicitly in the daemon's config: loopback, private and
// shared address space, link-local (cloud metadata included), multicast,
// and their IPv6 counterparts. The host's own addresses, the daemon and
// other sandboxes are denied on top of these by the enforcement points.
var AlwaysDenied = mustPrefixes(
	"0.0.0.0/8",      // "this network"
	"10.0.0.0/8",     // RFC 1918
	"100.64.0.0/10",  // CGNAT (RFC 6598)
	"127.0.0.0/8",    // loopback
	"169.254.0.0/16", // link-local, 169.254.169.254 metadata
	"172.16.0.0/12",  // RFC 1918
	"192.0.0.0/24",   // IETF protocol assignments
	"192.168.0.0/16", // RFC 1918
	"198.18.0.0/15",  // benchmarking
	"224.0.0.0/4",    // multicast
	"240.0.0.0/4",    // reserved, broadcast
	"::/128",         // unspecified
	"::1/128",        // loopback
	"::ffff:0:0/96",  // IPv4-mapped (would bypass the IPv4 rules)
	"64:ff9b::/96",   // NAT64 (same)
	"fc00::/7",       // ULA
	"fe80::/10",      // link-local
	"ff00::/8",       // multicast
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Denied reports whether dst is in an always-denied range that the
// operator's allow list does not reopen.
func Denied(dst netip.Addr, operatorAllowed []netip.Prefix) bool {
	dst = dst.Unmap()
	for _, p := range operatorAllowed {
		if p.Contains(dst) {
			return false
		}
	}
	for _, p := range AlwaysDenied {
		if p.Contains(dst) {
			return true
		}
	}
	return false
}

// AllowsAddr applies the address part of the policy to dst: always-denied
// ranges, block, and the CIDR allowlist. The domain part is enforced where
// names are known (DNS, proxy).
func (p Policy) AllowsAddr(dst netip.Addr, operatorAllowed []netip.Prefix) (bool, string) {
	if p.BlockNetwork {
		return false, "network blocked"
	}
	if Denied(dst, operatorAllowed) {
		return false, "internal range"
	}
	if len(p.CIDRAllowlist) == 0 {
		return true, ""
	}
	for _, c := range p.CIDRAllowlist {
		if c.Contains(dst.Unmap()) {
			return true, ""
		}
	}
	return false, "not in cidr_allowlist"
}
