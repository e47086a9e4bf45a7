package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/netpolicy/policy"
	"corral/internal/testwait"
)

var (
	allowedAddr = netip.MustParseAddr("198.51.100.7")  // allowed.test
	deniedAddr  = netip.MustParseAddr("198.51.100.66") // denied.test
	sbAddr      = netip.MustParseAddr("127.0.0.1")     // the sandbox's source
)

// fixture is a Proxy on loopback for sandbox "sb-1" connecting from
// 127.0.0.1. Destinations are simulated: the test says which original
// destination each connection had, and Dial connects every allowed one to
// a loopback backend whatever its address.
type fixture struct {
	t       *testing.T
	proxy   *Proxy
	addr    string
	backend string // loopback address every Dial reaches

	mu        sync.Mutex
	cond      *sync.Cond
	pol       policy.Policy
	dsts      map[uint16]netip.AddrPort // client port -> original destination
	resolved  map[netip.Addr][]string
	dialed    []string
	decisions chan policy.Decision
}

func newFixture(t *testing.T, backend string, mod func(*Config)) *fixture {
	t.Helper()
	checkNoLeaks(t)
	f := &fixture{
		t:         t,
		backend:   backend,
		dsts:      map[uint16]netip.AddrPort{},
		resolved:  map[netip.Addr][]string{allowedAddr: {"allowed.test"}, deniedAddr: {"denied.test"}},
		decisions: make(chan policy.Decision, 100),
	}
	f.cond = sync.NewCond(&f.mu)
	cfg := Config{
		Lookup: func(src netip.Addr) (string, policy.Policy, bool) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return "sb-1", f.pol, src == sbAddr
		},
		Decide: func(d policy.Decision) { f.decisions <- d },
		Resolved: func(sb string, dst netip.Addr) []string {
			f.mu.Lock()
			defer f.mu.Unlock()
			if sb != "sb-1" {
				return nil
			}
			return f.resolved[dst]
		},
		OriginalDst: f.originalDst,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			f.mu.Lock()
			f.dialed = append(f.dialed, addr)
			f.mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, f.backend)
		},
		LocalAddrs:  func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("198.51.100.99")}, nil },
		PeekTimeout: 300 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.proxy, f.addr = p, l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background(), l) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

// originalDst waits for the test to say where the connection was going
// (setDst).
func (f *fixture) originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	port := addrPortOf(c.RemoteAddr()).Port()
	timedOut := false
	timer := time.AfterFunc(5*time.Second, func() {
		f.mu.Lock()
		timedOut = true
		f.mu.Unlock()
		f.cond.Broadcast()
	})
	defer timer.Stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if dst, ok := f.dsts[port]; ok {
			return dst, nil
		}
		if timedOut {
			return netip.AddrPort{}, errors.New("test gave no destination")
		}
		f.cond.Wait()
	}
}

// setDst says that the connection from local port port was going to dst.
func (f *fixture) setDst(port uint16, dst string) {
	f.mu.Lock()
	f.dsts[port] = netip.MustParseAddrPort(dst)
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (f *fixture) setPolicy(p policy.Policy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pol = p
}

// dial connects to the proxy as the sandbox would reach dst.
func (f *fixture) dial(dst string) net.Conn {
	f.t.Helper()
	return f.dialFrom(dst, "127.0.0.1")
}

func (f *fixture) dialFrom(dst, src string) net.Conn {
	f.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", f.addr)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	f.setDst(addrPortOf(c.LocalAddr()).Port(), dst)
	return c
}

func (f *fixture) decision() policy.Decision {
	f.t.Helper()
	select {
	case d := <-f.decisions:
		return d
	case <-time.After(5 * time.Second):
		f.t.Fatal("no decision")
		return policy.Decision{}
	}
}

func (f *fixture) noDecision() {
	f.t.Helper()
	select {
	case d := <-f.decisions:
		f.t.Fatalf("unexpected decision %v", d)
	case <-time.After(100 * time.Millisecond):
	}
}

// echoServer echoes every connection until EOF, then closes it.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

// expectClosed checks that the proxy closes c without a byte.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || n > 0 || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection not closed by the proxy: %d bytes, %v", n, err)
	}
}

func TestAddressDecisions(t *testing.T) {
	f := newFixture(t, echoServer(t), func(c *Config) {
		c.OperatorAllowed = []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}
		c.Deny = []netip.Prefix{netip.MustParsePrefix("10.9.8.0/24")}
		c.HostNetwork = func(a netip.Addr) bool {
			for _, lan := range []string{"203.0.113.0/29", "198.51.100.64/29", "10.1.2.0/24"} {
				if netip.MustParsePrefix(lan).Contains(a) {
					return true
				}
			}
			return false
		}
	})
	cidr := policy.Policy{CIDRAllowlist: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/25")}}
	tests := []struct {
		name   string
		pol    policy.Policy
		dst    string
		reason string // "" : allowed
	}{
		{"default public", policy.Policy{}, "198.51.100.7:443", ""},
		{"default rfc1918", policy.Policy{}, "10.1.2.3:80", "internal range"},
		{"default metadata", policy.Policy{}, "169.254.169.254:80", "internal range"},
		{"default loopback", policy.Policy{}, "127.0.0.1:22", "internal range"},
		{"default cgnat", policy.Policy{}, "100.64.1.1:80", "internal range"},
		{"ipv6 ula", policy.Policy{}, "[fd00::1]:80", "internal range"},
		{"ipv6 public", policy.Policy{}, "[2001:db8::7]:443", ""},
		{"operator reopened", policy.Policy{}, "10.9.1.1:80", ""},
		{"deny beats operator", policy.Policy{}, "10.9.8.1:80", ReasonDenied},
		{"host address", policy.Policy{}, "198.51.100.99:22", ReasonHostAddress},
		{"host network", policy.Policy{}, "203.0.113.3:80", ReasonHostNetwork},
		{"host network in the cidr allowlist", cidr, "198.51.100.70:443", ReasonHostNetwork},
		{"blocked", policy.Policy{BlockNetwork: true}, "198.51.100.7:443", "network blocked"},
		{"cidr in", cidr, "198.51.100.7:443", ""},
		{"cidr out", cidr, "198.51.100.200:443", "not in cidr_allowlist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.t = t
			f.setPolicy(tt.pol)
			c := f.dial(tt.dst)
			d := f.decision()
			want := netip.MustParseAddrPort(tt.dst)
			if d.Allowed != (tt.reason == "") || d.Reason != tt.reason || d.Dst != want.Addr() || d.Port != want.Port() ||
				d.Via != "proxy" || d.Proto != "tcp" || d.SandboxID != "sb-1" || d.Time.IsZero() {
				t.Fatalf("decision %+v, want reason %q", d, tt.reason)
			}
			if tt.reason != "" {
				expectClosed(t, c)
				return
			}
			fmt.Fprint(c, "ping\n")
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil || line != "ping\n" {
				t.Fatalf("echo through the proxy: %q, %v", line, err)
			}
			f.mu.Lock()
			last := f.dialed[len(f.dialed)-1]
			f.mu.Unlock()
			if last != want.String() {
				t.Errorf("dialed %s, want the original destination %s", last, want)
			}
		})
	}
}

func TestProxyItselfAndUnknownSource(t *testing.T) {
	f := newFixture(t, echoServer(t), func(c *Config) {
		c.OperatorAllowed = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	c := f.dial(f.addr) // no DNAT happened: the destination is the proxy
	if d := f.decision(); d.Allowed || d.Reason != ReasonProxyItself {
		t.Errorf("decision %+v", d)
	}
	expectClosed(t, c)
	c = f.dialFrom("198.51.100.7:443", "127.0.0.2")
	expectClosed(t, c)
	f.noDecision()
}

func TestPerSandboxLimit(t *testing.T) {
	f := newFixture(t, echoServer(t), func(c *Config) { c.MaxConnsPerSandbox = 1 })
	first := f.dial("198.51.100.7:443")
	if d := f.decision(); !d.Allowed {
		t.Fatalf("first: %+v", d)
	}
	// The refusal is a reset, which may beat the dial's return.
	d0 := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
	second, err := d0.Dial("tcp", f.addr)
	if err == nil {
		f.setDst(addrPortOf(second.LocalAddr()).Port(), "198.51.100.7:443")
		defer second.Close()
	}
	d := f.decision()
	if d.Allowed || d.Reason != ReasonTooMany {
		t.Fatalf("second: %+v", d)
	}
	if d.Limit != "per_sandbox" || d.LimitMax != 1 || d.Refused != 1 {
		t.Errorf("refusal names limit %q of %d (%d refused), want per_sandbox of 1", d.Limit, d.LimitMax, d.Refused)
	}
	if err == nil {
		expectClosed(t, second)
	}
	first.Close()
	// The slot frees once the first connection's splice ends.
	testwait.For(t, 5*time.Second, "the first connection's slot to be freed", func() bool {
		held, _ := f.proxy.shares.Held("sb-1")
		return held == 0
	})
	c := f.dial("198.51.100.7:443")
	if d := f.decision(); !d.Allowed {
		t.Fatalf("after the first closed: %+v", d)
	}
	c.Close()
}

// Two hostile sandboxes that open all the connections they can leave a
// third its guaranteed share; each refusal is reported once a second at
// most, naming the bound.
func TestFairShares(t *testing.T) {
	f := newFixture(t, echoServer(t), func(c *Config) {
		c.MaxConns, c.MaxConnsPerSandbox, c.GuaranteedConns = 8, 4, 2
		c.Lookup = func(src netip.Addr) (string, policy.Policy, bool) {
			return map[string]string{"127.0.0.1": "sb-1", "127.0.0.2": "sb-2", "127.0.0.3": "sb-3"}[src.String()], policy.Policy{}, true
		}
		c.OriginalDst = func(*net.TCPConn) (netip.AddrPort, error) { return netip.MustParseAddrPort("198.51.100.7:443"), nil }
	})
	// A refused connection is reset at once, which may beat the dial's
	// return: a reset dial is a refusal too.
	dial := func(src string) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		if c, err := d.Dial("tcp", f.addr); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	hostile := func(src string) (held int, refusal policy.Decision) {
		for {
			dial(src)
			if d := f.decision(); !d.Allowed {
				return held, d
			}
			held++
		}
	}
	// sb-2 takes its share and bursts to its own limit; sb-3 gets its
	// share, and no burst: bursts may not use the last half of the
	// ceiling.
	if held, d := hostile("127.0.0.2"); held != 4 || d.Limit != "per_sandbox" || d.LimitMax != 4 {
		t.Errorf("sb-2 held %d, then %+v", held, d)
	}
	if held, d := hostile("127.0.0.3"); held != 2 || d.Limit != "shared" || d.LimitMax != 8 || d.SandboxID != "sb-3" {
		t.Errorf("sb-3 held %d, then %+v", held, d)
	}
	// Refused again within the second: no report.
	dial("127.0.0.3")
	f.noDecision()
	for i := range 2 {
		c := f.dial("198.51.100.7:443")
		if d := f.decision(); !d.Allowed {
			t.Fatalf("victim's connection %d: %+v", i+1, d)
		}
		fmt.Fprintf(c, "ping %d\n", i)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != fmt.Sprintf("ping %d\n", i) {
			t.Fatalf("victim's connection %d: %q %v", i+1, line, err)
		}
	}
}

// TestHalfClose: the sandbox sends a request and shuts down its write
// side; the destination reads to EOF, then answers; the answer still
// arrives.
func TestHalfClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		fmt.Fprintf(c, "got %d bytes", len(b))
	}()
	f := newFixture(t, l.Addr().String(), nil)
	c := f.dial("198.51.100.7:9000")
	f.decision()
	payload := strings.Repeat("x", 100_000)
	io.WriteString(c, payload)
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "got 100000 bytes" {
		t.Fatalf("answer after half-close: %q, %v", got, err)
	}
}

func TestIdleTimeout(t *testing.T) {
	f := newFixture(t, echoServer(t), func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
	c := f.dial("198.51.100.7:9000")
	f.decision()
	// Traffic keeps it open past the idle time...
	for range 4 {
		fmt.Fprint(c, "x")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatalf("active connection closed: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // half the idle timeout: the traffic must span it
	}
	// ...silence closes it.
	start := time.Now()
	expectClosed(t, c)
	if time.Since(start) > 3*time.Second {
		t.Error("idle connection outlived its timeout by far")
	}
}

func TestCloseEndsConnections(t *testing.T) {
	f := newFixture(t, echoServer(t), func(c *Config) { c.PeekTimeout = time.Minute })
	f.setPolicy(policy.Policy{})
	spliced := f.dial("198.51.100.7:443")
	f.decision()
	f.setPolicy(policy.Policy{DomainAllowlist: []string{"allowed.test"}})
	peeking := f.dial("198.51.100.7:443") // sends nothing: stuck in the peek
	testwait.For(t, 5*time.Second, "the second connection to be stuck in the peek", func() bool {
		return strings.Contains(allStacks(), "egress.peekName")
	})
	done := make(chan struct{})
	go func() { f.proxy.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	expectClosed(t, spliced)
	expectClosed(t, peeking)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := f.proxy.Serve(context.Background(), l); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve after Close: %v", err)
	}
}

func TestNewNeedsLookup(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without Lookup succeeded")
	}
}

func TestLocalAddrsFailClosed(t *testing.T) {
	f := newFixture(t, echoServer(t), func(c *Config) {
		c.LocalAddrs = func() ([]netip.Addr, error) { return nil, errors.New("netlink down") }
	})
	c := f.dial("198.51.100.7:443")
	if d := f.decision(); d.Allowed || d.Reason != ReasonHostAddress {
		t.Errorf("decision %+v", d)
	}
	expectClosed(t, c)
}

// TestDomainMode drives real TLS and HTTP clients through the proxy.
func TestDomainMode(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls %s", r.Host)
	}))
	defer tlsSrv.Close()
	httpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "http %s", r.Host)
	}))
	defer httpSrv.Close()
	backend := ""
	f := newFixture(t, "", func(c *Config) {
		c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, backend)
		}
	})
	f.setPolicy(policy.Policy{DomainAllowlist: []string{"allowed.test"}})

	tests := []struct {
		name    string
		dst     string
		backend string
		send    func(c net.Conn) (string, error) // the response, when allowed
		domain  string
		reason  string
	}{
		{"sni allowed and resolved", "198.51.100.7:443", tlsSrv.Listener.Addr().String(), tlsGet("allowed.test"), "allowed.test", ""},
		{"sni allowed but destination is another name's", "198.51.100.66:443", "", tlsGet("allowed.test"), "allowed.test", ReasonSNIMismatch},
		{"sni allowed but destination never resolved", "198.51.100.8:443", "", tlsGet("allowed.test"), "allowed.test", ReasonSNIMismatch},
		{"sni denied", "198.51.100.66:443", "", tlsGet("denied.test"), "denied.test", ReasonSNINotAllowed},
		{"tls without sni", "198.51.100.7:443", "", tlsGet(""), "", ReasonNoName},
		{"host allowed and resolved", "198.51.100.7:80", httpSrv.Listener.Addr().String(), httpGet("allowed.test:80"), "allowed.test", ""},
		{"host forged", "198.51.100.66:80", "", httpGet("allowed.test"), "allowed.test", ReasonHostMismatch},
		{"host denied", "198.51.100.66:80", "", httpGet("denied.test"), "denied.test", ReasonHostNotAllowed},
		{"two host headers", "198.51.100.7:80", "", raw("GET / HTTP/1.1\r\nHost: allowed.test\r\nHost: denied.test\r\n\r\n"), "", ReasonBadHTTP},
		{"absolute target disagrees", "198.51.100.7:80", "", raw("GET http://denied.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n"), "", ReasonBadHTTP},
		{"http/1.0 without host", "198.51.100.7:80", "", raw("GET / HTTP/1.0\r\n\r\n"), "", ReasonNoName},
		{"connect", "198.51.100.7:80", "", raw("CONNECT denied.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n"), "", ReasonConnect},
		{"garbage", "198.51.100.7:443", "", raw("\x00\x01\x02garbage"), "", ReasonNotTLSOrHTTP},
		{"ssh", "198.51.100.7:22", "", raw("SSH-2.0-OpenSSH_9.2\r\n"), "", ReasonNotTLSOrHTTP},
		{"silence", "198.51.100.7:25", "", raw(""), "", ReasonPeekTimeout},
		{"address policy first", "10.0.0.1:443", "", tlsGet("allowed.test"), "", "internal range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.t = t
			backend = tt.backend
			c := f.dial(tt.dst)
			type result struct {
				resp string
				err  error
			}
			res := make(chan result, 1)
			go func() {
				r, err := tt.send(c)
				res <- result{r, err}
			}()
			d := f.decision()
			if d.Allowed != (tt.reason == "") || d.Reason != tt.reason || d.Domain != tt.domain || d.Dst.String()+":"+fmt.Sprint(d.Port) != tt.dst {
				t.Errorf("decision %+v, want domain %q reason %q", d, tt.domain, tt.reason)
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			r := <-res
			if tt.reason != "" {
				if r.err == nil {
					t.Errorf("denied connection got a response: %q", r.resp)
				}
				return
			}
			host := strings.Split(tt.domain, ":")[0]
			if r.err != nil || !strings.HasSuffix(r.resp, host) && !strings.HasSuffix(r.resp, host+":80") {
				t.Errorf("response %q, %v", r.resp, r.err)
			}
		})
	}
}

// tlsGet does a TLS handshake (SNI serverName, certificate not checked)
// and a GET through c.
func tlsGet(serverName string) func(net.Conn) (string, error) {
	return func(c net.Conn) (string, error) {
		tc := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			return "", err
		}
		return httpGet(serverName)(tc)
	}
}

func httpGet(host string) func(net.Conn) (string, error) {
	return func(c net.Conn) (string, error) {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
}

func raw(s string) func(net.Conn) (string, error) {
	return func(c net.Conn) (string, error) {
		io.WriteString(c, s)
		b, err := io.ReadAll(c)
		if err == nil && len(b) == 0 {
			err = io.EOF
		}
		return string(b), err
	}
}

// checkNoLeaks fails the test if a goroutine of the proxy outlives it.
func checkNoLeaks(t *testing.T) {
	t.Cleanup(func() {
		var stacks string
		ended := false
		defer func() {
			if !ended { // waitFor failed the test
				t.Logf("goroutines left behind:\n%s", stacks)
			}
		}()
		testwait.For(t, 3*time.Second, "the proxy's goroutines to end", func() bool {
			stacks = allStacks()
			return !strings.Contains(stacks, "egress.(*Proxy)") && !strings.Contains(stacks, "egress.pipe")
		})
		ended = true
	})
}

// allStacks is the stack of every goroutine.
func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
