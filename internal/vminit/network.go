package vminit

import (
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
)

// setupNetwork brings up lo and, when the sandbox has a network, the
// interface with the configured MAC: its address and the default route.
func setupNetwork(n *Network) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	if n == nil {
		return nil
	}
	link, err := linkByMAC(n.MAC)
	if err != nil {
		return err
	}
	addr, err := netlink.ParseAddr(n.Address)
	if err != nil {
		return fmt.Errorf("address %q: %w", n.Address, err)
	}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("adding %s: %w", n.Address, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("%s up: %w", link.Attrs().Name, err)
	}
	gw := net.ParseIP(n.Gateway)
	if gw == nil {
		return fmt.Errorf("gateway %q is not an address", n.Gateway)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("default route via %s: %w", gw, err)
	}
	return nil
}

func linkByMAC(mac string) (netlink.Link, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if strings.EqualFold(l.Attrs().HardwareAddr.String(), mac) {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no interface with MAC %s (is virtio_net loaded?)", mac)
}
