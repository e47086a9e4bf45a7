package dnsd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"corral/internal/netpolicy/policy"
	"corral/internal/testwait"
)

// fakeUpstream is an authoritative-looking resolver on loopback (UDP and
// TCP on the same port) with a fixed zone. "slow." names never get an
// answer.
type fakeUpstream struct {
	addr    string
	queries atomic.Int64
	slow    chan struct{} // cap 1: a "slow." query arrived
	udp     *dns.Server
	tcp     *dns.Server
}

var zone = map[string][]string{
	"allowed.test.": {"allowed.test. 3600 IN A 198.51.100.7", "allowed.test. 3600 IN AAAA 2001:db8::7"},
	"denied.test.":  {"denied.test. 60 IN A 198.51.100.66"},
	"rebind.test.": {
		"rebind.test. 30 IN A 10.0.0.1", "rebind.test. 30 IN A 127.0.0.1",
		"rebind.test. 30 IN A 169.254.169.254", "rebind.test. 30 IN A 198.51.100.8",
		"rebind.test. 30 IN AAAA ::1", "rebind.test. 30 IN AAAA ::ffff:10.1.1.1",
	},
	"www.allowed.test.": {
		"www.allowed.test. 300 IN CNAME cdn.elsewhere.test.", "cdn.elsewhere.test. 20 IN A 198.51.100.9",
		"unrelated.test. 300 IN A 198.51.100.10",
	},
	"svc.allowed.test.": {`svc.allowed.test. 300 IN HTTPS 1 . alpn="h2" ipv4hint="10.0.0.1" ech="AEn+DQBFKwAgACABWIHUGj4u+PIggYXcR5JF0gYk3dCRioBW8uJq9H4mKAAIAAEAAQABAANAEnB1YmxpYy50bHMtZWNoLmRldgAA"`},
}

func startUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{slow: make(chan struct{}, 1)}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.queries.Add(1)
		q := r.Question[0]
		if strings.HasPrefix(q.Name, "slow.") {
			select {
			case u.slow <- struct{}{}:
			default:
			}
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		rrs, ok := zone[strings.ToLower(q.Name)]
		if q.Name == "big.allowed.test." {
			ok = true
			for i := range 100 {
				rrs = append(rrs, fmt.Sprintf("big.allowed.test. 60 IN A 198.51.100.%d", i+1))
			}
		}
		if !ok {
			m.Rcode = dns.RcodeNameError
		}
		for _, s := range rrs {
			rr, err := dns.NewRR(s)
			if err != nil {
				panic(err)
			}
			if q.Qtype == dns.TypeANY || q.Qtype == rr.Header().Rrtype || rr.Header().Rrtype == dns.TypeCNAME || !strings.EqualFold(rr.Header().Name, q.Name) {
				m.Answer = append(m.Answer, rr)
			}
		}
		if _, isUDP := w.RemoteAddr().(*net.UDPAddr); isUDP {
			m.Truncate(dns.MinMsgSize)
		}
		w.WriteMsg(m)
	})
	pc, l := listenBoth(t)
	u.addr = pc.LocalAddr().String()
	u.udp = &dns.Server{PacketConn: pc, Handler: h}
	u.tcp = &dns.Server{Listener: l, Handler: h}
	go u.udp.ActivateAndServe()
	go u.tcp.ActivateAndServe()
	t.Cleanup(func() {
		u.udp.Shutdown()
		u.tcp.Shutdown()
	})
	return u
}

// waitSlow waits until a "slow." query reaches the upstream.
func (u *fakeUpstream) waitSlow(t *testing.T) {
	t.Helper()
	const timeout = 3 * time.Second
	select {
	case <-u.slow:
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for the slow query to reach the upstream", timeout)
	}
}

// fixture is a Server on loopback for the sandbox "sb-1" at 127.0.0.1;
// every other source is unknown.
type fixture struct {
	srv  *Server
	addr string

	mu        sync.Mutex
	pol       policy.Policy
	decisions []policy.Decision
	resolved  []resolvedCall
}

type resolvedCall struct {
	sandbox, name string
	addrs         []netip.Addr
	ttl           time.Duration
}

func newFixture(t *testing.T, up *fakeUpstream, mod func(*Config)) *fixture {
	t.Helper()
	checkNoLeaks(t)
	f := &fixture{}
	cfg := Config{
		Upstream: []string{up.addr},
		Lookup: func(src netip.Addr) (string, policy.Policy, bool) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return "sb-1", f.pol, src == netip.MustParseAddr("127.0.0.1")
		},
		Decide: func(d policy.Decision) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.decisions = append(f.decisions, d)
		},
		OnResolved: func(sb, name string, addrs []netip.Addr, ttl time.Duration) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.resolved = append(f.resolved, resolvedCall{sb, name, addrs, ttl})
		},
		Timeout: 300 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, l := listenBoth(t)
	f.srv, f.addr = srv, pc.LocalAddr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), pc, l) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

func (f *fixture) setPolicy(p policy.Policy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pol = p
}

func (f *fixture) takeDecisions() []policy.Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.decisions
	f.decisions = nil
	return d
}

// query asks name/qtype over network from local (nil: any loopback port).
func (f *fixture) query(t *testing.T, network, name string, qtype uint16, local net.Addr) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 3 * time.Second, Dialer: &net.Dialer{LocalAddr: local}}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := c.Exchange(m, f.addr)
	if err != nil {
		t.Fatalf("query %s over %s: %v", name, network, err)
	}
	return r
}

func TestQueries(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, nil)
	domains := policy.Policy{DomainAllowlist: []string{"allowed.test", "*.allowed.test", "rebind.test"}}
	tests := []struct {
		name    string
		pol     policy.Policy
		qname   string
		qtype   uint16
		rcode   int
		answers int
		// decision expected first (zero Via: none)
		allowed bool
		reason  string
	}{
		{"default allows", policy.Policy{}, "allowed.test.", dns.TypeA, dns.RcodeSuccess, 1, true, ""},
		{"default nxdomain passes through", policy.Policy{}, "nowhere.test.", dns.TypeA, dns.RcodeNameError, 0, true, ""},
		{"allowlisted", domains, "Allowed.Test.", dns.TypeAAAA, dns.RcodeSuccess, 1, true, ""},
		{"wildcard", domains, "www.allowed.test.", dns.TypeA, dns.RcodeSuccess, 3, true, ""},
		{"not allowlisted", domains, "denied.test.", dns.TypeA, dns.RcodeNameError, 0, false, ReasonNotAllowed},
		{"blocked", policy.Policy{BlockNetwork: true}, "allowed.test.", dns.TypeA, dns.RcodeRefused, 0, false, ReasonBlocked},
		{"any forwarded", domains, "allowed.test.", dns.TypeANY, dns.RcodeSuccess, 2, true, ""},
		{"txt forwarded", domains, "allowed.test.", dns.TypeTXT, dns.RcodeSuccess, 0, true, ""},
		{"zone transfer refused", domains, "allowed.test.", dns.TypeAXFR, dns.RcodeRefused, 0, false, "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.setPolicy(tt.pol)
			f.takeDecisions()
			before := up.queries.Load()
			r := f.query(t, "udp", tt.qname, tt.qtype, nil)
			if r.Rcode != tt.rcode || len(r.Answer) != tt.answers {
				t.Fatalf("rcode %s with %d answers, want %s with %d:\n%v", dns.RcodeToString[r.Rcode], len(r.Answer), dns.RcodeToString[tt.rcode], tt.answers, r)
			}
			ds := f.takeDecisions()
			if tt.reason == "-" {
				if len(ds) != 0 {
					t.Errorf("decisions %v, want none", ds)
				}
				return
			}
			if len(ds) == 0 {
				t.Fatal("no decision")
			}
			d := ds[0]
			if d.Allowed != tt.allowed || d.Reason != tt.reason || d.SandboxID != "sb-1" || d.Via != "dns" || d.Domain != canonical(tt.qname) {
				t.Errorf("decision %+v", d)
			}
			// A forwarded name that did not resolve says so.
			if nx := tt.allowed && tt.rcode == dns.RcodeNameError; nx != (d.Rcode == "NXDOMAIN") ||
				nx && !strings.Contains(d.String(), "NXDOMAIN, the name does not exist") {
				t.Errorf("decision %q (rcode %q) for answer %s", d.String(), d.Rcode, dns.RcodeToString[r.Rcode])
			}
			if forwarded := up.queries.Load() > before; forwarded != tt.allowed {
				t.Errorf("forwarded upstream = %v, want %v", forwarded, tt.allowed)
			}
		})
	}
}

func TestUnknownSourceRefused(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, nil)
	for _, network := range []string{"udp", "tcp"} {
		var local net.Addr = &net.UDPAddr{IP: net.ParseIP("127.0.0.2")}
		if network == "tcp" {
			local = &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}
		}
		r := f.query(t, network, "allowed.test.", dns.TypeA, local)
		if r.Rcode != dns.RcodeRefused {
			t.Errorf("%s: rcode %s, want REFUSED", network, dns.RcodeToString[r.Rcode])
		}
	}
	if up.queries.Load() != 0 || len(f.takeDecisions()) != 0 {
		t.Error("unknown source was forwarded or logged as a sandbox decision")
	}
}

func TestRebindingFiltered(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, nil)
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeANY} {
		r := f.query(t, "udp", "rebind.test.", qt, nil)
		for _, rr := range r.Answer {
			if a, ok := rrAddr(rr); ok && a != netip.MustParseAddr("198.51.100.8") {
				t.Errorf("%s: internal address %v reached the sandbox", dns.TypeToString[qt], a)
			}
		}
	}
	var denied []string
	for _, d := range f.takeDecisions() {
		if !d.Allowed {
			if d.Reason != ReasonRebinding || d.Domain != "rebind.test" {
				t.Errorf("decision %+v", d)
			}
			denied = append(denied, d.Dst.String())
		}
	}
	slices.Sort(denied)
	denied = slices.Compact(denied)
	want := []string{"10.0.0.1", "10.1.1.1", "127.0.0.1", "169.254.169.254", "::1"}
	if !slices.Equal(denied, want) {
		t.Errorf("denied %v, want %v", denied, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.resolved {
		if len(c.addrs) != 1 || c.addrs[0] != netip.MustParseAddr("198.51.100.8") {
			t.Errorf("OnResolved %v", c.addrs)
		}
	}
}

func TestOperatorAllowedNotFiltered(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, func(c *Config) {
		c.OperatorAllowed = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
	})
	r := f.query(t, "udp", "rebind.test.", dns.TypeA, nil)
	var got []string
	for _, rr := range r.Answer {
		a, _ := rrAddr(rr)
		got = append(got, a.String())
	}
	slices.Sort(got)
	if want := []string{"10.0.0.1", "198.51.100.8"}; !slices.Equal(got, want) {
		t.Errorf("answer %v, want %v", got, want)
	}
}

// An answer pointing at the host's own networks loses those addresses,
// reported as such, and they are never opened.
func TestHostNetworkFiltered(t *testing.T) {
	up := startUpstream(t)
	lan := netip.MustParsePrefix("198.51.100.8/29")
	f := newFixture(t, up, func(c *Config) { c.HostNetwork = lan.Contains })
	r := f.query(t, "udp", "rebind.test.", dns.TypeA, nil)
	if len(r.Answer) != 0 {
		t.Errorf("answer %v, want every address filtered", r.Answer)
	}
	var host []string
	for _, d := range f.takeDecisions() {
		if !d.Allowed && d.Reason == ReasonHostNetwork {
			host = append(host, d.Dst.String())
		}
	}
	if !slices.Equal(host, []string{"198.51.100.8"}) {
		t.Errorf("host network decisions for %v, want 198.51.100.8", host)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.resolved) != 0 {
		t.Errorf("OnResolved %v", f.resolved)
	}
}

func TestOnResolvedAndCache(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, func(c *Config) {
		c.MaxTTL = 90 * time.Second
		c.MinOpen = 30 * time.Second
	})
	r := f.query(t, "udp", "allowed.test.", dns.TypeA, nil)
	if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 90 {
		t.Fatalf("TTL not capped at 90s: %v", r.Answer)
	}
	f.query(t, "udp", "www.allowed.test.", dns.TypeA, nil)
	f.mu.Lock()
	calls := slices.Clone(f.resolved)
	f.mu.Unlock()
	want := []resolvedCall{
		{"sb-1", "allowed.test", []netip.Addr{netip.MustParseAddr("198.51.100.7")}, 90 * time.Second},
		// The CNAME target's address, at the floor (its TTL is 20s); not
		// the unrelated record.
		{"sb-1", "www.allowed.test", []netip.Addr{netip.MustParseAddr("198.51.100.9")}, 30 * time.Second},
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("OnResolved calls\n%v\nwant\n%v", calls, want)
	}
	if got := f.srv.ResolvedNames("sb-1", netip.MustParseAddr("198.51.100.7")); !slices.Equal(got, []string{"allowed.test"}) {
		t.Errorf("ResolvedNames = %v", got)
	}
	if got := f.srv.ResolvedNames("sb-1", netip.MustParseAddr("198.51.100.10")); len(got) != 0 {
		t.Errorf("unrelated answer record learnt: %v", got)
	}
	if got := f.srv.ResolvedNames("sb-2", netip.MustParseAddr("198.51.100.7")); len(got) != 0 {
		t.Errorf("another sandbox sees the names: %v", got)
	}
	f.srv.Forget("sb-1")
	if got := f.srv.ResolvedNames("sb-1", netip.MustParseAddr("198.51.100.7")); len(got) != 0 {
		t.Errorf("Forget kept %v", got)
	}
}

func TestSVCBHintsAndECHStripped(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, nil)
	for _, tt := range []struct {
		pol     policy.Policy
		wantECH bool
	}{{policy.Policy{}, true}, {policy.Policy{DomainAllowlist: []string{"*.allowed.test"}}, false}} {
		f.setPolicy(tt.pol)
		r := f.query(t, "udp", "svc.allowed.test.", dns.TypeHTTPS, nil)
		if len(r.Answer) != 1 {
			t.Fatalf("answer %v", r.Answer)
		}
		s := r.Answer[0].String()
		if strings.Contains(s, "ipv4hint") || strings.Contains(s, "ech=") != tt.wantECH || !strings.Contains(s, "alpn") {
			t.Errorf("domain mode %v: %s", len(tt.pol.DomainAllowlist) > 0, s)
		}
	}
}

func TestUpstreamTimeoutServfail(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, nil)
	r := f.query(t, "udp", "slow.allowed.test.", dns.TypeA, nil)
	if r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	ds := f.takeDecisions()
	if len(ds) != 1 || ds[0].Reason != ReasonUpstreamFail || ds[0].Rcode != "SERVFAIL" || !strings.Contains(ds[0].String(), "SERVFAIL") {
		t.Errorf("decisions %v", ds)
	}
}

func TestSecondUpstreamUsed(t *testing.T) {
	up := startUpstream(t)
	dead, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	f := newFixture(t, up, func(c *Config) {
		c.Upstream = []string{dead.LocalAddr().String(), up.addr}
		c.Timeout = 2 * time.Second
	})
	if r := f.query(t, "udp", "allowed.test.", dns.TypeA, nil); len(r.Answer) != 1 {
		t.Fatalf("answer %v", r)
	}
}

func TestTCPAndTruncation(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, nil)
	// The upstream truncates over UDP; the server retries over TCP, then
	// truncates for the sandbox's UDP limit, and serves it all over TCP.
	r := f.query(t, "udp", "big.allowed.test.", dns.TypeA, nil)
	if !r.Truncated || len(r.Answer) >= 100 {
		t.Errorf("UDP answer: truncated %v with %d records", r.Truncated, len(r.Answer))
	}
	r = f.query(t, "tcp", "big.allowed.test.", dns.TypeA, nil)
	if r.Truncated || len(r.Answer) != 100 {
		t.Errorf("TCP answer: truncated %v with %d records", r.Truncated, len(r.Answer))
	}
	f.mu.Lock()
	if n := len(f.resolved); n != 2 || len(f.resolved[1].addrs) != 100 {
		t.Errorf("OnResolved calls %d", n)
	}
	f.mu.Unlock()
	// Several queries on one TCP connection.
	c := &dns.Client{Net: "tcp", Timeout: 3 * time.Second}
	conn, err := c.Dial(f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range 3 {
		m := new(dns.Msg)
		m.SetQuestion("allowed.test.", dns.TypeA)
		if r, _, err := c.ExchangeWithConn(m, conn); err != nil || len(r.Answer) != 1 {
			t.Fatalf("query %d on one connection: %v %v", i, r, err)
		}
	}
}

func TestInFlightBound(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, func(c *Config) {
		c.MaxInFlight = 1
		c.Timeout = 500 * time.Millisecond
	})
	slow := make(chan *dns.Msg)
	go func() {
		c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
		m := new(dns.Msg)
		m.SetQuestion("slow.allowed.test.", dns.TypeA)
		r, _, _ := c.Exchange(m, f.addr)
		slow <- r
	}()
	// Wait until the slow query holds the sandbox's only slot.
	up.waitSlow(t)
	if r := f.query(t, "udp", "allowed.test.", dns.TypeA, nil); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("second query: %s, want SERVFAIL while the first holds the slot", dns.RcodeToString[r.Rcode])
	}
	if ds := f.takeDecisions(); len(ds) != 1 || ds[0].Allowed || ds[0].Reason != ReasonTooMany ||
		ds[0].Limit != "per_sandbox" || ds[0].LimitMax != 1 || ds[0].Refused != 1 {
		t.Errorf("decisions %+v, want one refusal naming the per-sandbox bound of 1", ds)
	}
	if r := <-slow; r == nil || r.Rcode != dns.RcodeServerFailure {
		t.Errorf("slow query: %v", r)
	}
	if r := f.query(t, "udp", "allowed.test.", dns.TypeA, nil); r.Rcode != dns.RcodeSuccess {
		t.Errorf("after the slot is free: %s", dns.RcodeToString[r.Rcode])
	}
}

func TestPolicyChangeNextQuery(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, nil)
	if r := f.query(t, "udp", "denied.test.", dns.TypeA, nil); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("default policy: %s", dns.RcodeToString[r.Rcode])
	}
	f.setPolicy(policy.Policy{DomainAllowlist: []string{"allowed.test"}})
	if r := f.query(t, "udp", "denied.test.", dns.TypeA, nil); r.Rcode != dns.RcodeNameError {
		t.Fatalf("after the change: %s", dns.RcodeToString[r.Rcode])
	}
}

func TestCloseEndsEverything(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, func(c *Config) { c.Timeout = time.Minute })
	// A query stuck at the upstream and an idle TCP connection.
	go func() {
		c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
		m := new(dns.Msg)
		m.SetQuestion("slow.allowed.test.", dns.TypeA)
		c.Exchange(m, f.addr)
	}()
	idle, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	up.waitSlow(t)
	done := make(chan struct{})
	go func() { f.srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := f.srv.Serve(context.Background(), nil, nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve after Close: %v", err)
	}
	// checkNoLeaks (registered by newFixture) verifies the goroutines.
}

func TestNewDefaults(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without Lookup succeeded")
	}
	lookup := func(netip.Addr) (string, policy.Policy, bool) { return "", policy.Policy{}, false }
	if _, err := New(Config{Lookup: lookup, Upstream: []string{"no-port"}}); err == nil {
		t.Error("upstream without port accepted")
	}
	dir := t.TempDir()
	path := dir + "/resolv.conf"
	writeFile(t, path, "search example\nnameserver 10.255.255.53\nnameserver fd00::53\n")
	got, err := upstreamFromResolvConf(path)
	if err != nil || !slices.Equal(got, []string{"10.255.255.53:53", "[fd00::53]:53"}) {
		t.Errorf("upstreamFromResolvConf = %v, %v", got, err)
	}
}

// listenBoth listens on the same loopback port for UDP and TCP, trying
// again when the TCP side of a free UDP port is taken.
func listenBoth(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 50 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l
		}
		pc.Close()
	}
	t.Fatal("no loopback port free for both UDP and TCP")
	return nil, nil
}

// checkNoLeaks fails the test if a goroutine of this package outlives it.
func checkNoLeaks(t *testing.T) {
	t.Cleanup(func() {
		var stacks string
		ended := false
		defer func() {
			if !ended { // waitFor failed the test
				t.Logf("goroutines left behind:\n%s", stacks)
			}
		}()
		testwait.For(t, 3*time.Second, "the server's goroutines to end", func() bool {
			buf := make([]byte, 1<<20)
			stacks = string(buf[:runtime.Stack(buf, true)])
			return !strings.Contains(stacks, "dnsd.(*Server)")
		})
		ended = true
	})
}

// TestUpstreamRate: a sandbox's flood of names is forwarded upstream
// within its burst and rate; the rest is answered REFUSED without reaching
// the upstream, each refusal a denied decision.
func TestUpstreamRate(t *testing.T) {
	up := startUpstream(t)
	f := newFixture(t, up, func(c *Config) {
		c.UpstreamBurst = 5
		c.UpstreamRate = 0.001
	})
	refused := 0
	for i := range 20 {
		r := f.query(t, "udp", fmt.Sprintf("n%d.flood.test.", i), dns.TypeA, nil)
		if r.Rcode == dns.RcodeRefused {
			refused++
		}
	}
	if got := up.queries.Load(); got != 5 || refused != 15 {
		t.Fatalf("upstream saw %d queries, %d refused; want 5 and 15", got, refused)
	}
	n := 0
	for _, d := range f.takeDecisions() {
		if !d.Allowed && d.Reason == ReasonUpstreamRate && d.Domain != "" {
			n++
		}
	}
	if n != 15 {
		t.Errorf("%d refusals recorded as decisions, want 15", n)
	}
}
