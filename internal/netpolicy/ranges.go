package netpolicy

import (
	"net/netip"
	"slices"

	"github.com/google/nftables"

	"corral/internal/netpolicy/policy"
)

// span is an inclusive IPv4 range.
type span struct{ lo, hi uint32 }

// spansOf converts the IPv4 prefixes of ps to merged, sorted spans. IPv6
// prefixes, IPv4-mapped ones included, are skipped: like policy.AllowsAddr,
// an IPv4 destination only matches an IPv4 prefix.
func spansOf(ps []netip.Prefix) []span {
	var out []span
	for _, p := range ps {
		if !p.IsValid() || !p.Addr().Is4() {
			continue
		}
		lo := be32(p.Masked().Addr().As4())
		hi := lo | uint32(uint64(1)<<(32-p.Bits())-1)
		out = append(out, span{lo, hi})
	}
	return mergeSpans(out)
}

func mergeSpans(in []span) []span {
	s := slices.Clone(in)
	slices.SortFunc(s, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	var out []span
	for _, r := range s {
		if n := len(out); n > 0 && (out[n-1].hi == ^uint32(0) || r.lo <= out[n-1].hi+1) {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// subtractSpans returns a minus b; both merged and sorted.
func subtractSpans(a, b []span) []span {
	var out []span
	for _, r := range a {
		cur := []span{r}
		for _, cut := range b {
			var next []span
			for _, c := range cur {
				if cut.hi < c.lo || cut.lo > c.hi {
					next = append(next, c)
					continue
				}
				if cut.lo > c.lo {
					next = append(next, span{c.lo, cut.lo - 1})
				}
				if cut.hi < c.hi {
					next = append(next, span{cut.hi + 1, c.hi})
				}
			}
			cur = next
		}
		out = append(out, cur...)
	}
	return mergeSpans(out)
}

// deniedSpans is policy.AlwaysDenied minus the operator's ranges (IPv4).
func deniedSpans(operatorAllowed []netip.Prefix) []span {
	return subtractSpans(spansOf(policy.AlwaysDenied), spansOf(operatorAllowed))
}

// intervalElements encodes spans for an nftables interval set: a start
// element and an interval-end element one past the end (none for a span
// reaching 255.255.255.255).
func intervalElements(spans []span) []nftables.SetElement {
	var out []nftables.SetElement
	for _, s := range spans {
		lo := put32(s.lo)
		out = append(out, nftables.SetElement{Key: lo[:]})
		if s.hi != ^uint32(0) {
			end := put32(s.hi + 1)
			out = append(out, nftables.SetElement{Key: end[:], IntervalEnd: true})
		}
	}
	return out
}

func (s span) contains(a netip.Addr) bool {
	a = a.Unmap()
	if !a.Is4() {
		return false
	}
	v := be32(a.As4())
	return v >= s.lo && v <= s.hi
}

func spansContain(spans []span, a netip.Addr) bool {
	for _, s := range spans {
		if s.contains(a) {
			return true
		}
	}
	return false
}
