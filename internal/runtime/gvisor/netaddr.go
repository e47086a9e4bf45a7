package gvisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netAddrsFile records the addresses and routes of a sandbox's network
// namespace as the network layer made them (see keepNetAddrs).
const netAddrsFile = "netaddrs.json"

// netAddrs is a namespace's IPv4 configuration: per link, its addresses
// and the routes through it.
type netAddrs struct {
	Netns string    `json:"netns"`
	Links []netLink `json:"links"`
}

type netLink struct {
	Name   string     `json:"name"`
	Addrs  []string   `json:"addrs"` // CIDR
	Routes []netRoute `json:"routes"`
}

type netRoute struct {
	Dst   string `json:"dst,omitempty"` // CIDR; "" is the default route
	Gw    string `json:"gw,omitempty"`
	Scope uint8  `json:"scope"`
}

// keepNetAddrs records the IPv4 addresses and routes of nsPath's links
// into dir, before runsc's first start there.
//
// runsc --network=sandbox copies the namespace's links into its netstack
// and then removes their addresses from the host side (so that the host
// kernel does not answer for them), which takes their routes along. A
// restore in the same namespace (Resume) copies the namespace again and
// would find no address and no route: the resumed sandbox had no egress.
// Resume puts back what this recorded (putBackNetAddrs) before it restores.
func keepNetAddrs(dir, nsPath string) error {
	if nsPath == "" {
		return nil
	}
	rec := netAddrs{Netns: nsPath}
	err := inNetns(nsPath, func(h *netlink.Handle) error {
		links, err := h.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			if l.Attrs().Flags&net.FlagLoopback != 0 {
				continue
			}
			nl, err := readLink(h, l)
			if err != nil {
				return err
			}
			rec.Links = append(rec.Links, nl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording the sandbox's addresses: %w", err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, netAddrsFile), b, 0o600)
}

func readLink(h *netlink.Handle, l netlink.Link) (netLink, error) {
	nl := netLink{Name: l.Attrs().Name}
	addrs, err := h.AddrList(l, unix.AF_INET)
	if err != nil {
		return nl, err
	}
	for _, a := range addrs {
		nl.Addrs = append(nl.Addrs, a.IPNet.String())
	}
	routes, err := h.RouteList(l, unix.AF_INET)
	if err != nil {
		return nl, err
	}
	for _, r := range routes {
		nr := netRoute{Scope: uint8(r.Scope)}
		if r.Dst != nil && !isDefaultDst(r.Dst) {
			nr.Dst = r.Dst.String()
		}
		if r.Gw != nil {
			nr.Gw = r.Gw.String()
		}
		nl.Routes = append(nl.Routes, nr)
	}
	return nl, nil
}

// putBackNetAddrs gives the namespace recorded in dir its addresses and
// routes again (what exists already is kept). A sandbox without a record
// (no network, or one started by an older daemon) is left as it is.
func putBackNetAddrs(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, netAddrsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var rec netAddrs
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("reading %s: %w", netAddrsFile, err)
	}
	err = inNetns(rec.Netns, func(h *netlink.Handle) error {
		for _, nl := range rec.Links {
			if err := putBackLink(h, nl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("giving the sandbox its addresses again: %w", err)
	}
	return nil
}

func putBackLink(h *netlink.Handle, nl netLink) error {
	l, err := h.LinkByName(nl.Name)
	if err != nil {
		return fmt.Errorf("finding %s: %w", nl.Name, err)
	}
	for _, a := range nl.Addrs {
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		if err := h.AddrReplace(l, addr); err != nil {
			return fmt.Errorf("addressing %s with %s: %w", nl.Name, a, err)
		}
	}
	// Routes through a gateway need the link's own first: the scope
	// link routes come before the universe ones.
	for _, pass := range []bool{true, false} {
		for _, r := range nl.Routes {
			if (netlink.Scope(r.Scope) == netlink.SCOPE_LINK) != pass {
				continue
			}
			if err := putBackRoute(h, l, r); err != nil {
				return err
			}
		}
	}
	return nil
}

func putBackRoute(h *netlink.Handle, l netlink.Link, r netRoute) error {
	route := &netlink.Route{LinkIndex: l.Attrs().Index, Scope: netlink.Scope(r.Scope), Family: unix.AF_INET}
	if r.Dst != "" {
		_, dst, err := net.ParseCIDR(r.Dst)
		if err != nil {
			return err
		}
		route.Dst = dst
	}
	if r.Gw != "" {
		route.Gw = net.ParseIP(r.Gw)
	}
	if err := h.RouteReplace(route); err != nil {
		return fmt.Errorf("adding the route to %q via %q: %w", r.Dst, r.Gw, err)
	}
	return nil
}

// inNetns calls f with a netlink handle in the namespace at nsPath.
func inNetns(nsPath string, f func(*netlink.Handle) error) error {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("opening netns %s: %w", nsPath, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	return f(h)
}

// isDefaultDst reports 0.0.0.0/0.
func isDefaultDst(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0 && n.IP.IsUnspecified()
}
