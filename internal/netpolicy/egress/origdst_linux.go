package egress

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST from
// <linux/netfilter_ipv6/ip6_tables.h>, which x/sys/unix does not define.
const ip6tSOOriginalDst = 80

// OriginalDst returns the destination c had before the kernel's DNAT
// (getsockopt SO_ORIGINAL_DST, or IP6T_SO_ORIGINAL_DST for IPv6, on the
// accepted socket). Without NAT it is c's local address, when conntrack
// tracks the connection; when nothing tracks it, the kernel reports
// ENOENT.
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) {
	local := addrPortOf(c.LocalAddr())
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	var dst netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		if local.Addr().Is4() {
			dst, serr = originalDst4(int(fd))
		} else {
			dst, serr = originalDst6(int(fd))
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination of %v: %w", c.RemoteAddr(), err)
	}
	return dst, nil
}

// originalDst4 reads a struct sockaddr_in. x/sys has no plain-bytes
// getsockopt; IPv6Mreq is exactly 16 bytes, the size of a sockaddr_in,
// and the usual vehicle for this option. SOL_IP works on an IPv6 socket
// carrying an IPv4-mapped connection too.
func originalDst4(fd int) (netip.AddrPort, error) {
	m, err := unix.GetsockoptIPv6Mreq(fd, unix.SOL_IP, unix.SO_ORIGINAL_DST)
	if err != nil {
		return netip.AddrPort{}, os.NewSyscallError("getsockopt SO_ORIGINAL_DST", err)
	}
	sa := m.Multiaddr[:]
	if fam := binary.NativeEndian.Uint16(sa[0:2]); fam != unix.AF_INET {
		return netip.AddrPort{}, fmt.Errorf("SO_ORIGINAL_DST gave address family %d", fam)
	}
	port := binary.BigEndian.Uint16(sa[2:4])
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), port), nil
}

// originalDst6 reads a struct sockaddr_in6 (28 bytes) through
// IPv6MTUInfo, which starts with one and is large enough.
func originalDst6(fd int) (netip.AddrPort, error) {
	info, err := unix.GetsockoptIPv6MTUInfo(fd, unix.SOL_IPV6, ip6tSOOriginalDst)
	if err != nil {
		return netip.AddrPort{}, os.NewSyscallError("getsockopt IP6T_SO_ORIGINAL_DST", err)
	}
	sa := info.Addr
	if sa.Family != unix.AF_INET6 {
		return netip.AddrPort{}, fmt.Errorf("IP6T_SO_ORIGINAL_DST gave address family %d", sa.Family)
	}
	// Port is in network byte order in memory.
	var p [2]byte
	binary.NativeEndian.PutUint16(p[:], sa.Port)
	return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), binary.BigEndian.Uint16(p[:])), nil
}
