package netpolicy

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// flowFilter selects conntrack entries to delete.
type flowFilter func(f *netlink.ConntrackFlow) bool

func (f flowFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool { return f(flow) }

// deleteFlows deletes the IPv4 conntrack entries that involve addr (as the
// original source or destination), except those keep accepts, given the
// original destination, protocol and destination port of a flow the
// sandbox started. keep nil deletes them all. Without its entry, a flow's
// next packet is classified anew and meets the current rules.
func deleteFlows(addr netip.Addr, keep func(dst netip.Addr, proto uint8, port uint16) bool) (uint, error) {
	match := flowFilter(func(f *netlink.ConntrackFlow) bool {
		src, _ := netip.AddrFromSlice(f.Forward.SrcIP)
		dst, _ := netip.AddrFromSlice(f.Forward.DstIP)
		switch {
		case dst.Unmap() == addr:
			return keep == nil // started by the host (or another sandbox) towards addr
		case src.Unmap() != addr:
			return false
		case keep == nil:
			return true
		}
		return !keep(dst.Unmap(), f.Forward.Protocol, f.Forward.DstPort)
	})
	n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(unix.AF_INET), match)
	if err != nil {
		return n, fmt.Errorf("deleting conntrack entries of %v: %w", addr, err)
	}
	return n, nil
}
