package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// The test world of the network tests: every destination a sandbox tries
// is a namespace this test creates, with /32 routes on the host pointing
// into it, so even a broken policy sends nothing off the machine. The
// host's side of each veth is a /32 too: a fake internet is beyond a
// router, not on the host's LAN, and the daemon denies the networks the
// host's addresses are on (a /24 there would make the fake internet the
// host's LAN).
//
//	"internet"  198.51.100.1 and 198.51.100.9 (TEST-NET-2): HTTP on :80
//	"internal"  10.99.0.10 and 169.254.169.254 (metadata): HTTP on :80
//
// Each HTTP server answers "<name> <Host header>".
const (
	inetAddr     = "198.51.100.1"
	inetAddr2    = "198.51.100.9"
	internalAddr = "10.99.0.10"
	metadataAddr = "169.254.169.254"
)

const worldServer = `
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = (sys.argv[1] + ' ' + str(self.headers.get('Host')) + '\n').encode()
        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(('0.0.0.0', 80), H).serve_forever()
`

// world is the fake internet and internal network, and a fake upstream
// DNS: one for the package (newWorld), shared by every test that needs it.
type world struct {
	dnsAddr string // the fake upstream resolver, on loopback
	inetNS  string // the "internet" namespace's name
}

// worldLinkPrefixes start the names of every namespace and host link the
// package's test networks make (the world's cwi/cwn, and the LAN, usage
// and secrets worlds of single tests), which TestMain sweeps.
var worldLinkPrefixes = []string{"cw"}

// tb is what setting up a test network needs of a test: testing.TB, or
// pkgTB for the world the package shares.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// pkgTB is the package's own tb: a failure panics (newWorld turns it into
// the calling test's failure), cleanups run when TestMain ends.
type pkgTB struct {
	mu       sync.Mutex
	cleanups []func()
}

func (*pkgTB) Helper()                           {}
func (*pkgTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (*pkgTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (p *pkgTB) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

// done runs the cleanups, last first.
func (p *pkgTB) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.cleanups) - 1; i >= 0; i-- {
		p.cleanups[i]()
	}
	p.cleanups = nil
}

func run(t tb, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
}

// theWorld is the one world of the package, made by the first test that
// asks and removed when TestMain ends.
var theWorld struct {
	once sync.Once
	w    *world
	err  string
	tb   pkgTB
}

// newWorld is the package's world (made on first use): every test shares
// its namespaces, addresses and fake resolver.
func newWorld(t testing.TB) *world {
	t.Helper()
	theWorld.once.Do(func() {
		defer func() {
			if v := recover(); v != nil {
				theWorld.err = fmt.Sprint(v)
			}
		}()
		theWorld.w = makeWorld(&theWorld.tb)
	})
	if theWorld.err != "" {
		t.Fatalf("making the test world: %s", theWorld.err)
	}
	return theWorld.w
}

func makeWorld(t tb) *world {
	b := make([]byte, 3)
	rand.Read(b)
	tag := hex.EncodeToString(b)
	addNS(t, "cwi"+tag, "198.51.100.254", []string{inetAddr + "/24", inetAddr2 + "/24"}, "inet")
	addNS(t, "cwn"+tag, "10.99.0.9", []string{internalAddr + "/24", metadataAddr + "/32"}, "internal")
	return &world{dnsAddr: fakeDNS(t), inetNS: "cwi" + tag}
}

// addNS creates namespace name joined to the host by a veth (host side
// hostAddr/32), gives the namespace addrs, routes its replies back to the
// host (hostAddr, on-link), routes each of addrs (as a /32) from the host
// into it, and starts the HTTP server. The routes are appended: another
// world's to the same address may exist, and either reaches an answer.
func addNS(t tb, name, hostAddr string, addrs []string, label string) {
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	run(t, "ip", "link", "add", name, "type", "veth", "peer", "name", "w0", "netns", name)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	run(t, "ip", "addr", "add", hostAddr+"/32", "dev", name)
	run(t, "ip", "link", "set", name, "up")
	for _, a := range addrs {
		run(t, "ip", "-n", name, "addr", "add", a, "dev", "w0")
	}
	run(t, "ip", "-n", name, "link", "set", "w0", "up")
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	run(t, "ip", "-n", name, "route", "add", hostAddr+"/32", "dev", "w0")
	run(t, "ip", "-n", name, "route", "add", "default", "via", hostAddr)
	for _, a := range addrs {
		run(t, "ip", "route", "append", strings.Split(a, "/")[0]+"/32", "dev", name, "src", hostAddr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", name, "python3", "-c", worldServer, label)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Wait() })
}

// fakeDNS serves allowed.test → 198.51.100.1 and denied.test → 198.51.100.9
// on loopback; everything else is NXDOMAIN. It stands in for the upstream
// resolver, which is not under test (and must not be reached).
func fakeDNS(t tb) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"allowed.test.": inetAddr, "denied.test.": inetAddr2}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := strings.ToLower(q.Question[0].Name)
		if name == "servfail.test." { // an upstream that cannot resolve it
			m.Rcode = dns.RcodeServerFailure
		} else if ip, ok := names[name]; ok && q.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)})
		} else if !ok {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}
