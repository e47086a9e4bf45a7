package netpolicy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"corral/internal/ids"
	"corral/internal/netpolicy/policy"
)

const (
	echoPort    = 7
	discardPort = 9
	metaPort    = 80
	hostPort    = 17077 // host-side services a sandbox must not reach
	dropWait    = 800 * time.Millisecond
)

// sandbox is an attached slot with the fakes on its gateway.
type sandbox struct {
	*Slot
	proxy   *fakeProxy
	closers []func()
}

func (s *sandbox) close() {
	for _, c := range s.closers {
		c()
	}
	s.closers = nil
}

// attach attaches id and starts, on its gateway, the fake proxy and DNS
// stub (when configured) and a host service that must stay unreachable.
func (e *testEnv) attach(id string, p policy.Policy) *sandbox {
	t := e.t
	t.Helper()
	slot, err := e.net.Attach(context.Background(), id, p)
	if err != nil {
		t.Fatalf("Attach(%s): %v", id, err)
	}
	sb := &sandbox{Slot: slot}
	sub := &subTB{TB: t}
	if e.cfg.ProxyPort != 0 {
		sb.proxy = startProxy(sub, netip.AddrPortFrom(slot.Gateway, e.cfg.ProxyPort), e.mark)
	}
	if e.cfg.DNSPort != 0 {
		startDNSStub(sub, netip.AddrPortFrom(slot.Gateway, e.cfg.DNSPort))
	}
	startHostService(sub, netip.AddrPortFrom(slot.Gateway, hostPort))
	sb.closers = sub.cleanups
	t.Cleanup(sb.close)
	return sb
}

// subTB collects cleanups so a sandbox's fakes can stop before its Detach.
type subTB struct {
	testing.TB
	cleanups []func()
}

func (s *subTB) Cleanup(f func()) { s.cleanups = append([]func(){f}, s.cleanups...) }

// startHostService listens on a host address and greets with "hello host".
func startHostService(t testing.TB, at netip.AddrPort) {
	ln, err := net.Listen("tcp4", at.String())
	if err != nil {
		t.Fatalf("host service on %v: %v", at, err)
	}
	t.Cleanup(func() { ln.Close() })
	go tcpServe(ln, func(c net.Conn) { fmt.Fprintf(c, "hello host\n") })
}

// probes are what a sandbox tries to reach; each returns nil when it got
// the expected answer from the expected host.
func (e *testEnv) probes(s, other *sandbox) map[string]func() error {
	ns := s.NetnsPath
	hello := func(dst netip.AddrPort, want string) func() error {
		return func() error {
			got, err := tcpHello(ns, dst, dropWait)
			if err == nil && got != want {
				err = fmt.Errorf("answer %q, want %q", got, want)
			}
			return err
		}
	}
	udp := func(dst netip.AddrPort, want string) func() error {
		return func() error {
			got, err := udpAsk(ns, dst, "q", dropWait)
			if err == nil && got != want {
				err = fmt.Errorf("answer %q, want %q", got, want)
			}
			return err
		}
	}
	ap := netip.AddrPortFrom
	p := map[string]func() error{
		"tcp internet":   hello(ap(internet1, echoPort), "hello internet"),
		"tcp internet2":  hello(ap(internet2, echoPort), "hello internet"),
		"udp internet":   udp(ap(internet1, echoPort), "internet:q"),
		"icmp internet":  func() error { return ping(ns, internet1, dropWait) },
		"dns":            udp(ap(internet1, 53), "dns:q"),
		"tcp internal":   hello(ap(internal, echoPort), "hello internal"),
		"udp internal":   udp(ap(internal, echoPort), "internal:q"),
		"tcp metadata":   hello(ap(metadata, metaPort), "hello internal"),
		"icmp metadata":  func() error { return ping(ns, metadata, dropWait) },
		"host loopback":  hello(ap(netip.MustParseAddr("127.0.0.1"), hostPort), "hello host"),
		"host uplink":    hello(ap(e.hostAddr, hostPort), "hello host"),
		"host gateway":   hello(ap(s.Gateway, hostPort), "hello host"),
		"proxy directly": func() error { return tcpConnect(ns, ap(s.Gateway, e.cfg.ProxyPort)) },
	}
	if other != nil {
		p["tcp sandbox"] = hello(ap(other.Addr, echoPort), "hello sandbox")
		p["udp sandbox"] = udp(ap(other.Addr, echoPort), "sandbox:q")
		p["tcp gateway of sandbox"] = hello(ap(other.Gateway, hostPort), "hello host")
	}
	if e.cfg.ProxyPort == 0 {
		delete(p, "proxy directly")
	}
	return p
}

func tcpConnect(ns string, dst netip.AddrPort) error {
	return inNetns(ns, func() error {
		c, err := net.DialTimeout("tcp4", dst.String(), dropWait)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// expectReach runs every probe concurrently and checks that exactly the
// names in reach succeed.
func (e *testEnv) expectReach(t *testing.T, s, other *sandbox, reach ...string) {
	t.Helper()
	probes := e.probes(s, other)
	for _, r := range reach {
		if probes[r] == nil {
			t.Fatalf("unknown probe %q", r)
		}
	}
	var mu sync.Mutex
	got := map[string]error{}
	var wg sync.WaitGroup
	for name, f := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := f()
			mu.Lock()
			got[name] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	names := make([]string, 0, len(got))
	for name := range got {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want := slices.Contains(reach, name)
		if err := got[name]; want && err != nil {
			t.Errorf("%s: want reachable, got %v", name, err)
		} else if !want && err == nil {
			t.Errorf("%s: reachable, want denied", name)
		}
	}
}

// expectDenials checks that the sandbox's counters for reasons are non-zero.
func (e *testEnv) expectDenials(t *testing.T, s *sandbox, reasons ...string) {
	t.Helper()
	counts, err := e.net.DenialCounts(s.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range reasons {
		if counts[reason] == 0 {
			t.Errorf("no %s denials counted: %v", reason, counts)
		}
	}
}

// world starts the fake hosts' servers.
func (e *testEnv) world() {
	startServers(e.t, e.internet, "internet", discardPort, echoPort)
	startServers(e.t, e.inner, "internal", 0, echoPort, metaPort)
	startHostService(e.t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), hostPort))
	startHostService(e.t, netip.AddrPortFrom(e.hostAddr, hostPort))
}

// other attaches a second sandbox running servers, as a neighbour to probe.
func (e *testEnv) other() *sandbox {
	o := e.attach("sb-neighbouraaaaaaa", policy.Policy{})
	startServers(e.t, o.NetnsPath, "sandbox", 0, echoPort)
	return o
}

var (
	defaultReach = []string{"tcp internet", "tcp internet2", "udp internet", "icmp internet", "dns"}
	public       = netip.MustParsePrefix("198.51.100.1/32")
)

func TestPolicies(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	other := e.other()
	s := e.attach("sb-policiesaaaaaaaa", policy.Policy{})
	ctx := context.Background()

	t.Run("default", func(t *testing.T) {
		e.expectReach(t, s, other, defaultReach...)
		if !s.proxy.saw(netip.AddrPortFrom(internet1, echoPort)) {
			t.Error("TCP to the internet did not go through the proxy")
		}
		e.expectDenials(t, s, DeniedInternal, DeniedHost, DeniedSandbox)
	})
	steps := []struct {
		name    string
		p       policy.Policy
		resolve []netip.Addr
		reach   []string
		denied  []string // counters that must be non-zero afterwards
	}{
		{"block", policy.Policy{BlockNetwork: true}, nil, nil, []string{DeniedBlocked}},
		{"cidr", policy.Policy{CIDRAllowlist: []netip.Prefix{public}}, nil,
			[]string{"tcp internet", "udp internet", "icmp internet", "dns"}, []string{DeniedAllowlist}},
		{"cidr cannot reopen internal", policy.Policy{CIDRAllowlist: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("198.51.100.9/32")}}, nil,
			[]string{"tcp internet2", "dns"}, nil},
		{"domain before resolving", policy.Policy{DomainAllowlist: []string{"allowed.test"}}, nil, []string{"dns"}, []string{DeniedProtocol}},
		{"domain after resolving", policy.Policy{DomainAllowlist: []string{"allowed.test"}}, []netip.Addr{internet1, internal, metadata},
			[]string{"tcp internet", "dns"}, nil},
		{"default again", policy.Policy{}, nil, defaultReach, nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before, _ := e.net.Denials(s.ID)
			if err := e.net.SetPolicy(ctx, s.ID, st.p); err != nil {
				t.Fatal(err)
			}
			if st.resolve != nil {
				if err := e.net.AllowResolved(s.ID, st.resolve, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			e.expectReach(t, s, other, st.reach...)
			e.expectDenials(t, s, st.denied...)
			if after, _ := e.net.Denials(s.ID); after <= before {
				t.Errorf("denials did not grow: %d -> %d", before, after)
			}
		})
	}
	t.Run("no IPv6", func(t *testing.T) { checkNoIPv6(t, s) })
	t.Run("lookup", func(t *testing.T) { checkLookup(t, e, s) })
}

func checkNoIPv6(t *testing.T, s *sandbox) {
	ns, err := netns.GetFromPath(s.NetnsPath)
	must(t, err)
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	must(t, err)
	defer h.Close()
	if addrs, err := h.AddrList(nil, unix.AF_INET6); err != nil || len(addrs) != 0 {
		t.Errorf("sandbox IPv6 addresses: %v, %v", addrs, err)
	}
	host, err := netlink.LinkByName(s.HostLink)
	must(t, err)
	if addrs, err := netlink.AddrList(host, unix.AF_INET6); err != nil || len(addrs) != 0 {
		t.Errorf("host link IPv6 addresses: %v, %v", addrs, err)
	}
}

func checkLookup(t *testing.T, e *testEnv, s *sandbox) {
	id, p, ok := e.net.Lookup(s.Addr)
	if !ok || id != s.ID || p.BlockNetwork || len(p.CIDRAllowlist) != 0 {
		t.Errorf("Lookup(%v) = %q, %+v, %v", s.Addr, id, p, ok)
	}
	if id, _, ok := e.net.Lookup(netip.IPv4Unspecified()); ok {
		t.Errorf("Lookup(0.0.0.0) = %q", id)
	}
	if _, _, ok := e.net.Lookup(s.Gateway); ok {
		t.Error("Lookup(gateway) found a sandbox")
	}
	if got, ok := e.net.Slot(s.ID); !ok || got != *s.Slot {
		t.Errorf("Slot(%s) = %+v, %v", s.ID, got, ok)
	}
}

func TestResolvedExpire(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	s := e.attach("sb-expireaaaaaaaaaa", policy.Policy{DomainAllowlist: []string{"*.allowed.test"}})
	dst := netip.AddrPortFrom(internet1, echoPort)
	if err := e.net.AllowResolved(s.ID, []netip.Addr{internet1}, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := tcpHello(s.NetnsPath, dst, dropWait); err != nil {
		t.Fatalf("resolved address unreachable: %v", err)
	}
	// Refreshing restarts the timeout.
	time.Sleep(700 * time.Millisecond) // most of the first timeout passes
	if err := e.net.AllowResolved(s.ID, []netip.Addr{internet1}, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // past the first timeout, within the second
	if _, err := tcpHello(s.NetnsPath, dst, dropWait); err != nil {
		t.Fatalf("refreshed address unreachable: %v", err)
	}
	time.Sleep(2 * time.Second) // past the second timeout
	if _, err := tcpHello(s.NetnsPath, dst, dropWait); err == nil {
		t.Fatal("address still reachable after its timeout")
	}
}

func TestOperatorAllowed(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.OperatorAllowed = []netip.Prefix{netip.MustParsePrefix("10.99.0.0/16")} })
	e.world()
	other := e.other()
	s := e.attach("sb-operatoraaaaaaaa", policy.Policy{})
	e.expectReach(t, s, other, append([]string{"tcp internal", "udp internal"}, defaultReach...)...)
}

// TestNoProxy: without a proxy and resolver, TCP is forwarded through NAT
// after the same filter, and domain mode relies on the resolved set alone.
// Without Decide there is no reader and no log rule; denials are still
// refused at once and counted.
func TestNoProxy(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.ProxyPort, c.DNSPort, c.Decide = 0, 0, nil })
	e.world()
	other := e.other()
	s := e.attach("sb-directaaaaaaaaaa", policy.Policy{})
	e.expectReach(t, s, other, "tcp internet", "tcp internet2", "udp internet", "icmp internet")
	denialProbe{"tcp internal", "tcp", netip.AddrPortFrom(internal, echoPort), DeniedInternal}.try(t, s.NetnsPath)
	e.expectDenials(t, s, DeniedInternal)
	if n := readerGoroutines(); n != 0 {
		t.Errorf("%d nflog readers without Decide", n)
	}
	if err := e.net.SetPolicy(context.Background(), s.ID, policy.Policy{DomainAllowlist: []string{"allowed.test"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.net.AllowResolved(s.ID, []netip.Addr{internet2}, time.Minute); err != nil {
		t.Fatal(err)
	}
	e.expectReach(t, s, other, "tcp internet2")
}

// TestLiveChange: a policy change cuts connections it no longer allows.
func TestLiveChange(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	s := e.attach("sb-liveaaaaaaaaaaaa", policy.Policy{})
	var c net.Conn
	must(t, inNetns(s.NetnsPath, func() (err error) {
		c, err = net.DialTimeout("tcp4", netip.AddrPortFrom(internet1, echoPort).String(), time.Second)
		return err
	}))
	defer c.Close()
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || line != "hello internet\n" {
		t.Fatalf("banner %q, %v", line, err)
	}
	echo := func(msg string) error {
		c.SetDeadline(time.Now().Add(1500 * time.Millisecond))
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if err == nil && line != msg {
			err = fmt.Errorf("read %q", line)
		}
		return err
	}
	if err := echo("one\n"); err != nil {
		t.Fatalf("open connection: %v", err)
	}
	if err := e.net.SetPolicy(context.Background(), s.ID, policy.Policy{BlockNetwork: true}); err != nil {
		t.Fatal(err)
	}
	if err := echo("two\n"); err == nil {
		t.Error("open connection still works after block_network")
	}
	if _, err := tcpHello(s.NetnsPath, netip.AddrPortFrom(internet1, echoPort), dropWait); err == nil {
		t.Error("new connection works after block_network")
	}
	if err := e.net.SetPolicy(context.Background(), s.ID, policy.Policy{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tcpHello(s.NetnsPath, netip.AddrPortFrom(internet1, echoPort), dropWait); err != nil {
		t.Errorf("unblocked sandbox cannot connect: %v", err)
	}
}

func TestAttachDetachCycles(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	ctx := context.Background()
	for i := range 20 {
		s := e.attach(ids.NewSandbox(), policy.Policy{})
		if got, err := tcpHello(s.NetnsPath, netip.AddrPortFrom(internet1, echoPort), time.Second); err != nil || got != "hello internet" {
			c, _ := e.net.DenialCounts(s.ID)
			t.Fatalf("cycle %d: %q, %v (denials %v)", i, got, err, c)
		}
		s.close()
		if err := e.net.Detach(ctx, s.ID); err != nil {
			t.Fatalf("cycle %d: Detach: %v", i, err)
		}
		if err := e.net.Detach(ctx, s.ID); err != nil {
			t.Fatalf("cycle %d: second Detach: %v", i, err)
		}
		e.checkNoLeftovers(false)
		if ids, err := e.net.List(); err != nil || len(ids) != 0 {
			t.Fatalf("cycle %d: List = %v, %v", i, ids, err)
		}
	}
}
