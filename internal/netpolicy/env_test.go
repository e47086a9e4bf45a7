package netpolicy

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The test world. Everything a sandbox might reach is a namespace this
// test creates, routed only for traffic from the test pool (or marked by
// the fake proxy) through a private routing table whose default is
// unreachable, so even a broken policy sends nothing off the machine.
var (
	internet1 = netip.MustParseAddr("198.51.100.1")
	internet2 = netip.MustParseAddr("198.51.100.9")
	internal  = netip.MustParseAddr("10.99.0.10")
	metadata  = netip.MustParseAddr("169.254.169.254")
	// The host sides of the fake world's links, and the /30 whose sources
	// the test's private routing table serves: a block no other test's
	// network uses (the e2e and selftest worlds' host sides are
	// 198.51.100.254, and this package's rule 9004 would take their
	// traffic into its table while a test runs beside them).
	inetLocal  = netip.MustParseAddr("198.51.100.237") // host side of the internet link
	innerLocal = netip.MustParseAddr("198.51.100.238") // host side of the internal link
	fixtureSrc = netip.MustParsePrefix("198.51.100.236/30")
)

// testEnv is one test's Network plus its fake world.
type testEnv struct {
	t        testing.TB
	cfg      Config
	net      *Network
	suffix   string
	rtTable  int
	mark     uint32
	hostAddr netip.Addr // the host's uplink address (a local address, not a peer)
	internet string     // netns path of the fake internet
	inner    string     // netns path of the fake internal + metadata hosts
	decided  *decisionLog
}

// requireRoot skips tests that need root and the kernel features.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, links and nftables tables")
	}
	if _, err := os.Stat("/proc/sys/net/ipv4/ip_forward"); err != nil {
		t.Skipf("no IPv4 sysctls: %v", err)
	}
	c, err := nftables.New()
	if err == nil {
		_, err = c.ListTables()
	}
	if err != nil {
		t.Skipf("nftables unavailable: %v", err)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newTestEnv builds a Network with a unique table, link prefix and pool,
// the fake world, and a cleanup that tears everything down and checks that
// nothing is left.
func newTestEnv(t testing.TB, mutate func(*Config)) *testEnv {
	requireRoot(t)
	suffix := randHex(2)
	var r [6]byte
	rand.Read(r[:])
	e := &testEnv{t: t, suffix: suffix, rtTable: 20000 + int(binary.BigEndian.Uint16(r[:2])%20000), mark: 0xc0a10000 | uint32(r[2]),
		decided: &decisionLog{}}
	e.cfg = Config{
		StateDir:   t.TempDir(),
		Pool:       netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 100 + r[3]%100, r[0], 0}), 24),
		Table:      "corraltest_" + suffix,
		LinkPrefix: "ct" + suffix,
		DNSPort:    15300 + uint16(r[1]),
		ProxyPort:  15600 + uint16(r[1]),
		LogGroup:   40000 + binary.BigEndian.Uint16(r[4:])%20000,
		Decide:     e.decided.record,
		Logger:     slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&e.cfg)
	}
	e.hostAddr = uplinkAddr(t)
	restoreForwarding(t)
	e.setupWorld()
	n, err := New(context.Background(), e.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.net = n
	t.Cleanup(func() {
		if err := e.net.Teardown(context.Background()); err != nil {
			t.Errorf("Teardown: %v", err)
		}
		e.checkNoLeftovers(true)
	})
	return e
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// uplinkAddr is the IPv4 address of the host's default-route link.
func uplinkAddr(t testing.TB) netip.Addr {
	routes, err := netlink.RouteList(nil, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst != nil && r.Dst.IP.To4() != nil && !r.Dst.IP.IsUnspecified() {
			continue
		}
		link, err := netlink.LinkByIndex(r.LinkIndex)
		if err != nil {
			continue
		}
		addrs, _ := netlink.AddrList(link, unix.AF_INET)
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok {
				return ip.Unmap()
			}
		}
	}
	t.Skip("no uplink address to test host isolation against")
	return netip.Addr{}
}

// restoreForwarding puts net.ipv4.ip_forward back as the test found it.
func restoreForwarding(t testing.TB) {
	old, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile("/proc/sys/net/ipv4/ip_forward", old, 0o644) })
}

// setupWorld creates the fake internet (198.51.100.1 and .9) and the fake
// internal network (10.99.0.10 and 169.254.169.254), each behind its own
// veth, and the policy routing that reaches them: from the test pool or
// with the fake proxy's mark, through a private table whose default is
// unreachable.
func (e *testEnv) setupWorld() {
	t := e.t
	dir := t.TempDir()
	e.internet = e.fixtureNS(dir, "internet", "cx"+e.suffix+"i", inetLocal, internet1, internet2)
	e.inner = e.fixtureNS(dir, "internal", "cx"+e.suffix+"n", innerLocal, internal, metadata)
	routes := []*netlink.Route{
		e.fixtureRoute(internet1, "cx"+e.suffix+"i", inetLocal),
		e.fixtureRoute(internet2, "cx"+e.suffix+"i", inetLocal),
		e.fixtureRoute(internal, "cx"+e.suffix+"n", innerLocal),
		e.fixtureRoute(metadata, "cx"+e.suffix+"n", innerLocal),
		{Table: e.rtTable, Type: unix.RTN_UNREACHABLE, Dst: ipNet(netip.IPv4Unspecified(), 0)},
	}
	for _, r := range routes {
		if err := netlink.RouteAdd(r); err != nil {
			t.Fatalf("adding test route %v: %v", r, err)
		}
		t.Cleanup(func() { netlink.RouteDel(r) })
	}
	rules := []*netlink.Rule{
		e.rule(9001, func(r *netlink.Rule) {
			r.Dst = ipNet(e.cfg.Pool.Addr(), e.cfg.Pool.Bits())
			r.Table = unix.RT_TABLE_MAIN
		}),
		e.rule(9002, func(r *netlink.Rule) { r.Src = ipNet(e.cfg.Pool.Addr(), e.cfg.Pool.Bits()) }),
		e.rule(9003, func(r *netlink.Rule) { r.Mark = e.mark; m := ^uint32(0); r.Mask = &m }),
		e.rule(9004, func(r *netlink.Rule) { r.Src = ipNet(fixtureSrc.Addr(), fixtureSrc.Bits()) }),
	}
	for _, r := range rules {
		if err := netlink.RuleAdd(r); err != nil {
			t.Fatalf("adding test rule %v: %v", r, err)
		}
		t.Cleanup(func() { netlink.RuleDel(r) })
	}
}

func (e *testEnv) rule(prio int, f func(*netlink.Rule)) *netlink.Rule {
	r := netlink.NewRule()
	r.Priority = prio
	r.Family = unix.AF_INET
	r.Table = e.rtTable
	f(r)
	return r
}

func (e *testEnv) fixtureRoute(dst netip.Addr, link string, src netip.Addr) *netlink.Route {
	l, err := netlink.LinkByName(link)
	if err != nil {
		e.t.Fatal(err)
	}
	return &netlink.Route{Table: e.rtTable, LinkIndex: l.Attrs().Index, Dst: ipNet(dst, 32), Src: net.IP(src.AsSlice()), Scope: unix.RT_SCOPE_LINK}
}

// fixtureNS creates a namespace with addresses addrs on its eth0, linked to
// the host by hostLink (address local/32), default route out of eth0.
func (e *testEnv) fixtureNS(dir, name, hostLink string, local netip.Addr, addrs ...netip.Addr) string {
	t := e.t
	path := filepath.Join(dir, name)
	if err := createNetns(path); err != nil {
		t.Fatalf("creating %s namespace: %v", name, err)
	}
	t.Cleanup(func() { removeNetns(path) })
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostLink}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}); err != nil {
		t.Fatalf("creating %s: %v", hostLink, err)
	}
	t.Cleanup(func() { deleteLink(hostLink) })
	host, err := netlink.LinkByName(hostLink)
	if err != nil {
		t.Fatal(err)
	}
	must(t, disableIPv6(hostLink))
	must(t, netlink.AddrAdd(host, &netlink.Addr{IPNet: ipNet(local, 32)}))
	must(t, netlink.LinkSetUp(host))
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, _ := h.LinkByName("lo")
	must(t, h.LinkSetUp(lo))
	eth, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		must(t, h.AddrAdd(eth, &netlink.Addr{IPNet: ipNet(a, 32)}))
	}
	must(t, h.LinkSetUp(eth))
	must(t, h.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(netip.IPv4Unspecified(), 0), Scope: unix.RT_SCOPE_LINK}))
	return path
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// inNetns runs f on a thread in the namespace at path. The thread is never
// unlocked, so it ends with the goroutine and never serves other code.
func inNetns(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := netns.GetFromPath(path)
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("entering %s: %w", path, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// checkNoLeftovers fails the test if anything of e's Network is left on
// the host: links, addresses in the pool, namespace mounts, state files,
// per-sandbox nftables objects or map elements (or the table itself when
// tableGone).
func (e *testEnv) checkNoLeftovers(tableGone bool) {
	t := e.t
	t.Helper()
	links, err := netlink.LinkList()
	must(t, err)
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, e.cfg.LinkPrefix) {
			t.Errorf("leftover link %s", l.Attrs().Name)
		}
	}
	addrs, err := netlink.AddrList(nil, unix.AF_INET)
	must(t, err)
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && e.cfg.Pool.Contains(ip.Unmap()) {
			t.Errorf("leftover address %v", a)
		}
	}
	for _, d := range []string{e.cfg.netnsDir(), e.cfg.slotsDir()} {
		ents, err := os.ReadDir(d)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Error(err)
		}
		for _, ent := range ents {
			t.Errorf("leftover %s", filepath.Join(d, ent.Name()))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), e.cfg.netnsDir()) {
		t.Errorf("leftover namespace mount under %s", e.cfg.netnsDir())
	}
	e.checkTable(tableGone)
}

func (e *testEnv) checkTable(gone bool) {
	t := e.t
	t.Helper()
	c, err := nftables.New()
	must(t, err)
	tbl := &nftables.Table{Family: nftables.TableFamilyINet, Name: e.cfg.Table}
	exists, err := e.net.tableExists(c)
	must(t, err)
	if gone || !exists {
		if exists {
			t.Errorf("table %s left behind", e.cfg.Table)
		}
		return
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	must(t, err)
	for _, ch := range chains {
		if ch.Table.Name == e.cfg.Table && strings.HasPrefix(ch.Name, "sb") {
			t.Errorf("leftover chain %s", ch.Name)
		}
	}
	sets, err := c.GetSets(tbl)
	must(t, err)
	for _, s := range sets {
		if strings.HasPrefix(s.Name, "sb") {
			t.Errorf("leftover set %s", s.Name)
		}
		if s.IsMap {
			if els, _ := c.GetSetElements(s); len(els) > 0 {
				t.Errorf("leftover elements in %s: %d", s.Name, len(els))
			}
		}
	}
	objs, err := c.GetNamedObjects(tbl)
	must(t, err)
	if len(objs) > 0 {
		t.Errorf("leftover counters: %d", len(objs))
	}
}
