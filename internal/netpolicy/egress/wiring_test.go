package egress_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"corral/internal/netpolicy/dnsd"
	"corral/internal/netpolicy/egress"
	"corral/internal/netpolicy/policy"
)

// TestWiredToResolver wires the proxy to the real resolver the way the
// daemon does (Resolved = dnsd.Server.ResolvedNames): in domain mode a
// connection with SNI allowed.test to allowed.test's address is denied
// until the sandbox has resolved allowed.test through the resolver, and
// allowed after.
func TestWiredToResolver(t *testing.T) {
	upstream := fakeUpstream(t, "allowed.test. 60 IN A 198.51.100.7")
	lookup := func(src netip.Addr) (string, policy.Policy, bool) {
		return "sb-1", policy.Policy{DomainAllowlist: []string{"allowed.test"}}, src == netip.MustParseAddr("127.0.0.1")
	}
	resolver, err := dnsd.New(dnsd.Config{Upstream: []string{upstream}, Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	dnsConn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go resolver.Serve(context.Background(), dnsConn, nil)
	defer resolver.Close()

	backend := tlsEchoServer(t)
	decisions := make(chan policy.Decision, 10)
	proxy, err := egress.New(egress.Config{
		Lookup:   lookup,
		Decide:   func(d policy.Decision) { decisions <- d },
		Resolved: resolver.ResolvedNames,
		OriginalDst: func(*net.TCPConn) (netip.AddrPort, error) {
			return netip.MustParseAddrPort("198.51.100.7:443"), nil
		},
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, backend)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go proxy.Serve(context.Background(), l)
	defer proxy.Close()

	handshake := func() error {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		return tls.Client(c, &tls.Config{ServerName: "allowed.test", InsecureSkipVerify: true}).Handshake()
	}
	if err := handshake(); err == nil {
		t.Error("handshake got through before the sandbox resolved the name")
	}
	if d := <-decisions; d.Allowed || d.Reason != egress.ReasonSNIMismatch {
		t.Errorf("before resolving: %+v", d)
	}

	m := new(dns.Msg)
	m.SetQuestion("allowed.test.", dns.TypeA)
	if r, err := dns.Exchange(m, dnsConn.LocalAddr().String()); err != nil || len(r.Answer) != 1 {
		t.Fatalf("resolving: %v %v", r, err)
	}
	if err := handshake(); err != nil {
		t.Errorf("handshake after resolving: %v", err)
	}
	if d := <-decisions; !d.Allowed || d.Domain != "allowed.test" {
		t.Errorf("after resolving: %+v", d)
	}
}

// fakeUpstream answers every query with the records given (UDP, loopback).
func fakeUpstream(t *testing.T, records ...string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, s := range records {
			rr, _ := dns.NewRR(s)
			m.Answer = append(m.Answer, rr)
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

// tlsEchoServer completes TLS handshakes on loopback.
func tlsEchoServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}
