package vm

import (
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	goruntime "runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"corral/internal/vminit"
)

// Names inside a sandbox's network namespace. The network layer leaves
// sandboxLink there, addressed, with a default route; a VM cannot use it
// directly, so the runtime moves its address to the guest and bridges it
// with a tap device QEMU drives.
const (
	sandboxLink = "eth0"
	bridgeLink  = "br0"
	tapLink     = "tap0"
)

// plugNetwork prepares the namespace at nsPath for a guest with MAC mac:
// it returns the guest's network config and an open tap device for QEMU.
func plugNetwork(nsPath, mac string) (*vminit.Network, *os.File, error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("opening netns %s: %w", nsPath, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, nil, err
	}
	defer h.Close()
	// A bridge of an earlier run of this sandbox in the same namespace (a
	// reboot after a filesystem-only pause) goes first, freeing eth0; the
	// network layer has addressed eth0 again (netpolicy.Readdress).
	if old, err := h.LinkByName(bridgeLink); err == nil {
		if err := h.LinkDel(old); err != nil {
			return nil, nil, fmt.Errorf("removing the previous run's %s: %w", bridgeLink, err)
		}
	}
	eth, err := h.LinkByName(sandboxLink)
	if err != nil {
		return nil, nil, fmt.Errorf("finding %s in %s: %w", sandboxLink, nsPath, err)
	}
	cfg, err := takeAddress(h, eth, mac)
	if err != nil {
		return nil, nil, err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeLink}}
	if err := h.LinkAdd(br); err != nil {
		return nil, nil, fmt.Errorf("adding %s: %w", bridgeLink, err)
	}
	tap, err := openTap(ns)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range []string{sandboxLink, tapLink} {
		if err := enslave(h, name, br); err != nil {
			tap.Close()
			return nil, nil, err
		}
	}
	if err := h.LinkSetUp(br); err != nil {
		tap.Close()
		return nil, nil, fmt.Errorf("bringing up %s: %w", bridgeLink, err)
	}
	return cfg, tap, nil
}

// takeAddress removes eth's IPv4 address (and so its routes) and returns
// them as the guest's configuration.
func takeAddress(h *netlink.Handle, eth netlink.Link, mac string) (*vminit.Network, error) {
	addrs, err := h.AddrList(eth, unix.AF_INET)
	if err != nil || len(addrs) != 1 {
		return nil, fmt.Errorf("%s has %d IPv4 addresses, want 1 (%v)", sandboxLink, len(addrs), err)
	}
	routes, err := h.RouteList(eth, unix.AF_INET)
	if err != nil {
		return nil, err
	}
	var gw net.IP
	for _, r := range routes {
		if r.Gw != nil && (r.Dst == nil || isDefault(r.Dst)) {
			gw = r.Gw
		}
	}
	if gw == nil {
		return nil, fmt.Errorf("%s has no default route", sandboxLink)
	}
	if err := h.AddrDel(eth, &addrs[0]); err != nil {
		return nil, fmt.Errorf("moving the address off %s: %w", sandboxLink, err)
	}
	return &vminit.Network{MAC: mac, Address: addrs[0].IPNet.String(), Gateway: gw.String()}, nil
}

// openTap creates tapLink in ns and returns its queue. A tap device
// belongs to the namespace of the thread that opens /dev/net/tun, so this
// happens on a goroutine locked to its own thread, which is never unlocked:
// the thread, possibly still in the sandbox's namespace, ends with it.
func openTap(ns netns.NsHandle) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		goruntime.LockOSThread()
		f, err := openTapHere(ns)
		ch <- result{f, err}
	}()
	r := <-ch
	return r.f, r.err
}

func openTapHere(ns netns.NsHandle) (*os.File, error) {
	if err := netns.Set(ns); err != nil {
		return nil, fmt.Errorf("entering the sandbox netns: %w", err)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(tapLink)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("creating %s: %w", tapLink, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+tapLink), nil
}

// guestMAC is a locally administered unicast MAC derived from the id.
func guestMAC(id string) string {
	s := sha256.Sum256([]byte(id))
	return net.HardwareAddr{0x02, s[0], s[1], s[2], s[3], s[4]}.String()
}

// isDefault reports 0.0.0.0/0 (netlink reports a default route either
// without a destination or with this one).
func isDefault(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0 && n.IP.IsUnspecified()
}

// replugTap gives a resumed guest a new tap in the namespace plugNetwork
// prepared (the old one went with the old QEMU), on the same bridge.
func replugTap(nsPath string) (*os.File, error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("opening netns %s: %w", nsPath, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	br, err := h.LinkByName(bridgeLink)
	if err != nil {
		return nil, fmt.Errorf("finding %s in %s: %w", bridgeLink, nsPath, err)
	}
	tap, err := openTap(ns)
	if err != nil {
		return nil, err
	}
	if err := enslave(h, tapLink, br); err != nil {
		tap.Close()
		return nil, err
	}
	return tap, nil
}

// enslave puts the link name on the bridge br and brings it up.
func enslave(h *netlink.Handle, name string, br netlink.Link) error {
	l, err := h.LinkByName(name)
	if err == nil {
		err = h.LinkSetMasterByIndex(l, br.Attrs().Index)
	}
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		return fmt.Errorf("bridging %s: %w", name, err)
	}
	return nil
}
