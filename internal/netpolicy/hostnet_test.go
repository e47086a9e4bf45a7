package netpolicy

import (
	"cmp"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"corral/internal/netpolicy/policy"
	"corral/internal/testwait"
)

// The host's networks: each address and its on-link prefix, less
// Corral's links, the pool and the operator's ranges; the addresses
// themselves stay.
func TestHostNetsOf(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	pool := p("10.88.0.0/16")
	ours := func(link string) bool { return link == "crl1" }
	uplink := ifAddr{link: "eth0", prefix: p("192.0.2.2/24")}
	tests := []struct {
		name        string
		addrs       []ifAddr
		allowed     []netip.Prefix
		denied, not []string
		nets        []string
	}{
		{"uplink's LAN", []ifAddr{uplink, {link: "lo", prefix: p("127.0.0.1/8")}}, nil,
			[]string{"192.0.2.1", "192.0.2.2", "192.0.2.255", "127.0.0.53"}, []string{"192.0.3.1", "198.51.100.1"},
			[]string{"127.0.0.0/8", "127.0.0.1/32", "192.0.2.0/24", "192.0.2.2/32"}},
		{"a /32 is the address alone", []ifAddr{{link: "cx0", prefix: p("198.51.100.254/32")}}, nil,
			[]string{"198.51.100.254"}, []string{"198.51.100.1", "198.51.100.253"}, []string{"198.51.100.254/32"}},
		{"point-to-point peer", []ifAddr{{link: "tun0", prefix: p("203.0.113.9/32"), peer: p("203.0.113.16/30")}}, nil,
			[]string{"203.0.113.9", "203.0.113.17"}, []string{"203.0.113.10", "203.0.113.20"}, nil},
		{"Corral's links and the pool left out",
			[]ifAddr{{link: "crl1", prefix: p("198.51.100.1/24")}, {link: "other", prefix: p("10.88.0.5/30")}, uplink}, nil,
			[]string{"192.0.2.7"}, []string{"198.51.100.1", "198.51.100.7", "10.88.0.5", "10.88.0.6"}, nil},
		{"the pool is cut out of a wider LAN", []ifAddr{{link: "br0", prefix: p("10.0.0.1/8")}}, nil,
			[]string{"10.0.0.2", "10.89.0.1"}, []string{"10.88.3.3"}, nil},
		{"the operator re-opens a LAN but not the host", []ifAddr{uplink}, []netip.Prefix{p("192.0.2.0/24")},
			[]string{"192.0.2.2"}, []string{"192.0.2.1", "192.0.2.3"}, nil},
		{"the operator re-opens part of a LAN", []ifAddr{uplink}, []netip.Prefix{p("192.0.2.1/32")},
			[]string{"192.0.2.2", "192.0.2.3", "192.0.2.0"}, []string{"192.0.2.1"}, nil},
		{"IPv6 and invalid addresses skipped", []ifAddr{{link: "eth0", prefix: p("2001:db8::1/64")}, {link: "eth1"}}, nil,
			nil, []string{"0.0.0.0", "2001:db8::2"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hostNetsOf(tt.addrs, ours, pool, tt.allowed)
			for _, d := range tt.denied {
				if !spansContain(h.spans, a(d)) {
					t.Errorf("%s not denied (%v)", d, h)
				}
			}
			for _, d := range tt.not {
				if spansContain(h.spans, a(d)) {
					t.Errorf("%s denied (%v)", d, h)
				}
			}
			if tt.nets != nil {
				var got []string
				for _, n := range h.nets {
					got = append(got, n.String())
				}
				if !slices.Equal(got, tt.nets) && !(len(got) == 0 && len(tt.nets) == 0) {
					t.Errorf("networks %v, want %v", got, tt.nets)
				}
			}
		})
	}
	if !hostNetsOf([]ifAddr{uplink}, ours, pool, nil).equal(hostNetsOf([]ifAddr{uplink, uplink}, ours, pool, nil)) {
		t.Error("the same networks compare unequal")
	}
}

// hostLAN joins the host to a simulated LAN in TEST-NET-2: a veth whose
// host side gets addr (its prefix on-link) and whose other side is in an
// empty namespace of the test's, where whatever reaches it ends. The LAN
// is routed from the test's sandboxes into it. It returns a remover.
func (e *testEnv) hostLAN(addr netip.Prefix) func() {
	t := e.t
	name := "cx" + e.suffix + "l"
	path := filepath.Join(t.TempDir(), "lan")
	must(t, createNetns(path))
	t.Cleanup(func() { removeNetns(path) })
	ns, err := netns.GetFromPath(path)
	must(t, err)
	defer ns.Close()
	must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}))
	removed := false
	remove := func() {
		if !removed {
			removed = true
			deleteLink(name)
		}
	}
	t.Cleanup(remove)
	l, err := netlink.LinkByName(name)
	must(t, err)
	must(t, disableIPv6(name))
	must(t, netlink.AddrAdd(l, &netlink.Addr{IPNet: ipNet(addr.Addr(), addr.Bits())}))
	must(t, netlink.LinkSetUp(l))
	must(t, netlink.RouteAdd(&netlink.Route{Table: e.rtTable, LinkIndex: l.Attrs().Index, Dst: ipNet(addr.Masked().Addr(), addr.Bits()), Scope: unix.RT_SCOPE_LINK}))
	return remove
}

// waitHostNet waits until the hostnet set and HostNetwork agree that a is
// denied (or not).
func (e *testEnv) waitHostNet(t *testing.T, a netip.Addr, denied bool) {
	t.Helper()
	agreed := false
	defer func() {
		if !agreed { // waitFor failed the test
			t.Logf("%v: in the set %v, HostNetwork %v (networks %v)", a, spansContain(e.hostnetSet(t), a), e.net.HostNetwork(a), e.net.HostNetworks())
		}
	}()
	testwait.For(t, 5*time.Second, fmt.Sprintf("the hostnet set and HostNetwork to agree that %v is denied=%v", a, denied), func() bool {
		return spansContain(e.hostnetSet(t), a) == denied && e.net.HostNetwork(a) == denied
	})
	agreed = true
}

// hostnetSet reads the kernel's hostnet set back as spans.
func (e *testEnv) hostnetSet(t *testing.T) []span {
	c, err := nftables.New()
	must(t, err)
	els, err := c.GetSetElements(&nftables.Set{Table: e.net.table(), Name: hostnetSet, KeyType: nftables.TypeIPAddr, Interval: true})
	must(t, err)
	slices.SortFunc(els, func(a, b nftables.SetElement) int { return cmp.Compare(be32([4]byte(a.Key)), be32([4]byte(b.Key))) })
	var out []span
	for _, el := range els {
		v := be32([4]byte(el.Key))
		switch {
		case el.IntervalEnd && len(out) > 0:
			out[len(out)-1].hi = v - 1
		case !el.IntervalEnd:
			out = append(out, span{v, ^uint32(0)})
		}
	}
	return out
}

// TestHostNetwork: an address the host gains puts its LAN in the hostnet
// set at once (a sandbox's TCP and UDP to a neighbour are refused,
// counted and reported with DeniedHostNetwork), the resolver's and
// proxy's check agrees, and the LAN leaves the set with the address.
func TestHostNetwork(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	s := e.attach("sb-hostlanaaaaaaaaa", policy.Policy{})
	lan := netip.MustParsePrefix("198.51.100.217/29")
	neighbour := netip.MustParseAddr("198.51.100.218")
	if e.net.HostNetwork(neighbour) {
		t.Fatalf("%v denied before the host is on its network", neighbour)
	}
	remove := e.hostLAN(lan)
	e.waitHostNet(t, neighbour, true)
	if !slices.Contains(e.net.HostNetworks(), lan.Masked()) {
		t.Errorf("networks %v lack %v", e.net.HostNetworks(), lan.Masked())
	}
	e.expectRefused(t, s, []denialProbe{
		{"tcp neighbour", "tcp", netip.AddrPortFrom(neighbour, echoPort), DeniedHostNetwork},
		{"udp neighbour", "udp", netip.AddrPortFrom(neighbour, echoPort), DeniedHostNetwork},
	})
	e.expectDenials(t, s, DeniedHostNetwork)
	// The internet and always-denied ranges keep their own answers.
	e.expectRefused(t, s, []denialProbe{{"tcp internal", "tcp", netip.AddrPortFrom(internal, echoPort), DeniedInternal}})
	if got, err := tcpHello(s.NetnsPath, netip.AddrPortFrom(internet1, echoPort), refusalTimeout); err != nil || got != "hello internet" {
		t.Errorf("internet: %q %v", got, err)
	}
	remove()
	e.waitHostNet(t, neighbour, false)
}

// TestHostNetworkOperatorAllowed: a re-opened LAN is not denied, its
// host address still is.
func TestHostNetworkOperatorAllowed(t *testing.T) {
	lan := netip.MustParsePrefix("198.51.100.225/29")
	e := newTestEnv(t, func(c *Config) { c.OperatorAllowed = []netip.Prefix{lan.Masked()} })
	e.hostLAN(lan)
	e.waitHostNet(t, lan.Addr(), true)
	for _, a := range []string{"198.51.100.224", "198.51.100.226", "198.51.100.231"} {
		if addr := netip.MustParseAddr(a); e.net.HostNetwork(addr) || spansContain(e.hostnetSet(t), addr) {
			t.Errorf("%s denied though the operator re-opened %v", a, lan.Masked())
		}
	}
}
