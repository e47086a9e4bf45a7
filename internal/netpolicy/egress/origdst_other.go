//go:build !linux

package egress

import (
	"fmt"
	"net"
	"net/netip"

	"corral/internal/errdefs"
)

// OriginalDst needs Linux's SO_ORIGINAL_DST.
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) {
	return netip.AddrPort{}, fmt.Errorf("original destination: %w", errdefs.ErrNotSupported)
}
