package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/netpolicy/policy"
	"corral/internal/testwait"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// decisionLog records what Config.Decide receives.
type decisionLog struct {
	mu      sync.Mutex
	ds      []policy.Decision
	changed chan struct{} // closed by the next record; nil until wait wants it
}

func (l *decisionLog) record(d policy.Decision) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ds = append(l.ds, d)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

func (l *decisionLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ds)
}

// of returns the decisions about sandbox id recorded from index from on.
func (l *decisionLog) of(id string, from int) []policy.Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []policy.Decision
	for _, d := range l.ds[from:] {
		if d.SandboxID == id {
			out = append(out, d)
		}
	}
	return out
}

// wait returns the first decision from index from on that equals want
// (ignoring Time), waiting up to a few seconds for the reader.
func (l *decisionLog) wait(from int, want policy.Decision) (policy.Decision, bool) {
	timeout := time.NewTimer(3 * time.Second)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		for _, d := range l.ds[from:] {
			got := d
			got.Time = time.Time{}
			if got == want && !d.Time.IsZero() {
				l.mu.Unlock()
				return d, true
			}
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-timeout.C:
			return policy.Decision{}, false
		}
	}
}

// refusalTimeout is how long a denied probe may wait at most; it fails at
// once when refused, so fastRefusal is far below it.
const (
	refusalTimeout = 5 * time.Second
	fastRefusal    = 500 * time.Millisecond
)

// denialProbe is one attempt a policy denies, how it must fail, and the
// decision it must produce.
type denialProbe struct {
	name   string
	proto  string
	dst    netip.AddrPort
	reason string
}

// try makes the attempt from ns and checks that it was refused (a TCP
// reset, or ICMP admin-prohibited: EHOSTUNREACH on a connected UDP
// socket) well before its timeout.
func (p denialProbe) try(t *testing.T, ns string) {
	t.Helper()
	start := time.Now()
	var err error
	var want syscall.Errno
	switch p.proto {
	case "tcp":
		want = syscall.ECONNREFUSED
		_, err = tcpHello(ns, p.dst, refusalTimeout)
	case "udp":
		want = syscall.EHOSTUNREACH
		_, err = udpAsk(ns, p.dst, "q", refusalTimeout)
	case "icmp":
		err = ping(ns, p.dst.Addr(), 300*time.Millisecond) // the helper waits for an echo reply only
		if err == nil {
			t.Errorf("%s: ping answered", p.name)
		}
		return
	}
	if elapsed := time.Since(start); !errors.Is(err, want) || elapsed > fastRefusal {
		t.Errorf("%s: %v after %v; want %v at once", p.name, err, elapsed.Round(time.Millisecond), want)
	}
}

// expectRefused makes each attempt and checks its decision.
func (e *testEnv) expectRefused(t *testing.T, s *sandbox, probes []denialProbe) {
	t.Helper()
	from := e.decided.len()
	for _, p := range probes {
		p.try(t, s.NetnsPath)
		want := policy.Decision{SandboxID: s.ID, Proto: p.proto, Dst: p.dst.Addr(), Port: p.dst.Port(), Reason: p.reason, Via: "nftables"}
		if _, ok := e.decided.wait(from, want); !ok {
			t.Errorf("%s: no decision %+v; got %v", p.name, want, e.decided.of(s.ID, from))
		}
	}
}

// barrier makes a denied attempt from s and waits for its decision. The
// kernel logs denials to the group in order and the reader decides them
// in order, so every denial logged before it has been decided by then.
// s's log limit must not be spent.
func (e *testEnv) barrier(t *testing.T, s *sandbox) {
	t.Helper()
	e.expectRefused(t, s, []denialProbe{{"barrier", "tcp", netip.AddrPortFrom(internal, echoPort), DeniedInternal}})
}

// TestDenialDecisions: every attempt the address policy denies is refused
// at once and reaches Decide with its destination and reason, in each
// mode; allowed traffic produces no nftables decision.
func TestDenialDecisions(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	other := e.other()
	s := e.attach("sb-decisionsaaaaaaa", policy.Policy{})
	ap := netip.AddrPortFrom
	ctx := context.Background()

	t.Run("default", func(t *testing.T) {
		e.expectRefused(t, s, []denialProbe{
			{"tcp internal", "tcp", ap(internal, echoPort), DeniedInternal},
			{"tcp metadata", "tcp", ap(metadata, metaPort), DeniedInternal},
			{"udp internal", "udp", ap(internal, echoPort), DeniedInternal},
			{"icmp metadata", "icmp", ap(metadata, 0), DeniedInternal},
			{"tcp sandbox", "tcp", ap(other.Addr, echoPort), DeniedSandbox},
			{"udp sandbox", "udp", ap(other.Addr, echoPort), DeniedSandbox},
			{"host uplink", "tcp", ap(e.hostAddr, hostPort), DeniedHost},
			{"host gateway", "tcp", ap(s.Gateway, hostPort), DeniedHost},
			{"gateway of sandbox", "tcp", ap(other.Gateway, hostPort), DeniedHost},
			{"proxy directly", "tcp", ap(s.Gateway, e.cfg.ProxyPort), DeniedHost},
		})
		from := e.decided.len()
		if _, err := tcpHello(s.NetnsPath, ap(internet1, echoPort), time.Second); err != nil {
			t.Fatalf("allowed connection: %v", err)
		}
		e.barrier(t, s)
		if ds := e.decided.of(s.ID, from); len(ds) > 1 {
			t.Errorf("allowed connection produced decisions %v", ds[:len(ds)-1])
		}
	})
	steps := []struct {
		name   string
		p      policy.Policy
		probes []denialProbe
	}{
		{"block", policy.Policy{BlockNetwork: true}, []denialProbe{
			{"tcp internet", "tcp", ap(internet1, echoPort), DeniedBlocked},
			{"udp internet", "udp", ap(internet1, echoPort), DeniedBlocked},
			{"dns", "udp", ap(internet1, 53), DeniedBlocked},
			{"tcp internal", "tcp", ap(internal, echoPort), DeniedBlocked},
			{"host gateway", "tcp", ap(s.Gateway, hostPort), DeniedBlocked},
		}},
		{"cidr", policy.Policy{CIDRAllowlist: []netip.Prefix{public}}, []denialProbe{
			{"tcp internet2", "tcp", ap(internet2, echoPort), DeniedAllowlist},
			{"tcp internal", "tcp", ap(internal, echoPort), DeniedInternal},
		}},
		{"domain", policy.Policy{DomainAllowlist: []string{"allowed.test"}}, []denialProbe{
			{"tcp unresolved", "tcp", ap(internet1, echoPort), DeniedAllowlist},
			{"udp internet", "udp", ap(internet1, echoPort), DeniedProtocol},
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			must(t, e.net.SetPolicy(ctx, s.ID, st.p))
			e.expectRefused(t, s, st.probes)
		})
	}
	if lost := e.net.LostDecisions(); lost != 0 {
		t.Errorf("LostDecisions = %d", lost)
	}
}

// floodDenied sends n UDP datagrams from ns to dst as fast as it can (an
// unconnected socket, so the ICMP errors do not stop it) and returns how
// long that took.
func floodDenied(t *testing.T, ns string, dst netip.AddrPort, n int) time.Duration {
	t.Helper()
	var elapsed time.Duration
	must(t, inNetns(ns, func() error {
		pc, err := net.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			return err
		}
		defer pc.Close()
		to := net.UDPAddrFromAddrPort(dst)
		start := time.Now()
		for i := range n {
			if _, err := pc.WriteTo([]byte("flood"), to); err != nil {
				return fmt.Errorf("datagram %d: %w", i, err)
			}
		}
		elapsed = time.Since(start)
		return nil
	}))
	return elapsed
}

// waitCount waits until sandbox id's counter for reason reaches want.
func (e *testEnv) waitCount(t *testing.T, id, reason string, want uint64) uint64 {
	t.Helper()
	var got uint64
	testwait.For(t, 3*time.Second, fmt.Sprintf("%s's %s counter to reach %d", id, reason, want), func() bool {
		counts, err := e.net.DenialCounts(id)
		must(t, err)
		got = counts[reason]
		return got >= want
	})
	return got
}

// TestDenialFlood: a sandbox flooding denied packets gets every one
// refused and counted, but the per-sandbox limit bounds the decisions.
func TestDenialFlood(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	s := e.attach("sb-floodaaaaaaaaaaa", policy.Policy{})
	quiet := e.attach("sb-quietaaaaaaaaaaa", policy.Policy{}) // its log limit stays unspent
	const packets = 2000
	before, err := e.net.DenialCounts(s.ID)
	must(t, err)
	from := e.decided.len()
	elapsed := floodDenied(t, s.NetnsPath, netip.AddrPortFrom(internal, echoPort), packets)
	want := before[DeniedInternal] + packets
	if got := e.waitCount(t, s.ID, DeniedInternal, want); got != want {
		t.Errorf("internal counter %d, want %d", got, want)
	}
	e.barrier(t, quiet) // the reader has drained the flood's denials
	got := len(e.decided.of(s.ID, from))
	limit := LogRate + LogBurst + int(LogRate*elapsed.Seconds()) + 2
	t.Logf("%d packets in %v: %d decisions (bound %d), %d lost", packets, elapsed, got, limit, e.net.LostDecisions())
	if got > limit || got < LogBurst/2 {
		t.Errorf("%d decisions for %d denied packets in %v; want between %d and %d", got, packets, elapsed, LogBurst/2, limit)
	}
	// The bucket refills: a quiet second later the next attempt is logged.
	time.Sleep(time.Second) // the limit's window must pass
	from = e.decided.len()
	probe := denialProbe{"tcp internal", "tcp", netip.AddrPortFrom(internal, echoPort), DeniedInternal}
	e.expectRefused(t, s, []denialProbe{probe})
	if n := len(e.decided.of(s.ID, from)); n != 1 {
		t.Errorf("%d decisions for one attempt", n)
	}
}

// TestNFLOGOverflow: when Decide stalls and the socket overflows, the
// reader counts the lost messages by the kernel's sequence numbers and
// keeps going.
func TestNFLOGOverflow(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	s := e.attach("sb-overflowaaaaaaaa", policy.Policy{})
	// The rules keep logging; this test reads the group, with the kernel's
	// smallest socket buffer.
	e.net.stopReader()
	r, err := openNFLOG(e.cfg.LogGroup, 0, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	must(t, err)
	defer r.close()
	release := make(chan struct{})
	unstall := sync.OnceFunc(func() { close(release) })
	defer unstall() // before r.close, which waits for the reader
	var once sync.Once
	log := &decisionLog{}
	r.start(e.net.resolveDenial, func(d policy.Decision) {
		once.Do(func() { <-release }) // the first call stalls
		log.record(d)
	})
	floodDenied(t, s.NetnsPath, netip.AddrPortFrom(internal, echoPort), 500)
	testwait.For(t, 3*time.Second, "the stalled reader's socket to overflow", func() bool { return socketDrops(t, r) > 0 })
	unstall()
	time.Sleep(time.Second) // the limit's bucket refills
	from := log.len()
	probe := denialProbe{"tcp internal", "tcp", netip.AddrPortFrom(internal, echoPort), DeniedInternal}
	probe.try(t, s.NetnsPath)
	want := policy.Decision{SandboxID: s.ID, Proto: "tcp", Dst: internal, Port: echoPort, Reason: DeniedInternal, Via: "nftables"}
	if _, ok := log.wait(from, want); !ok {
		t.Errorf("no decision after the overflow: %v", log.of(s.ID, from))
	}
	if r.lost.Load() == 0 {
		t.Errorf("no lost messages counted (%d decisions)", log.len())
	}
	t.Logf("%d decisions, %d lost", log.len(), r.lost.Load())
}

// TestNFLOGClose: Close stops the reader goroutine and no Decide call
// follows; a second reader of the same group is refused while one runs.
func TestNFLOGClose(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	s := e.attach("sb-closeaaaaaaaaaaa", policy.Policy{})
	if _, err := openNFLOG(e.cfg.LogGroup, nflogRcvBuf, slog.New(slog.NewTextHandler(io.Discard, nil))); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("second reader of group %d: %v", e.cfg.LogGroup, err)
	}
	probe := denialProbe{"tcp internal", "tcp", netip.AddrPortFrom(internal, echoPort), DeniedInternal}
	e.expectRefused(t, s, []denialProbe{probe})
	if n := readerGoroutines(); n != 1 {
		t.Errorf("%d reader goroutines before Close", n)
	}
	must(t, e.net.Close())
	if n := readerGoroutines(); n != 0 {
		t.Errorf("%d reader goroutines after Close", n)
	}
	// The group is free: a reader of the test's own gets the next denial,
	// and Decide nothing.
	r, err := openNFLOG(e.cfg.LogGroup, nflogRcvBuf, slog.New(slog.NewTextHandler(io.Discard, nil)))
	must(t, err)
	defer r.close()
	log := &decisionLog{}
	r.start(e.net.resolveDenial, log.record)
	from := e.decided.len()
	probe.try(t, s.NetnsPath) // still refused: the rules stay
	want := policy.Decision{SandboxID: s.ID, Proto: "tcp", Dst: internal, Port: echoPort, Reason: DeniedInternal, Via: "nftables"}
	if _, ok := log.wait(0, want); !ok {
		t.Errorf("the denial after Close was not logged to the group: %v", log.of(s.ID, 0))
	}
	if n := e.decided.len(); n != from {
		t.Errorf("%d decisions after Close", n-from)
	}
	must(t, e.net.Close())
}

// socketDrops is how many messages the kernel dropped for r's socket
// because it was full (the Drops column of /proc/net/netlink). It reads
// the calling thread's namespace: inNetns may have left the main thread,
// which /proc/net shows, in a sandbox's.
func socketDrops(t *testing.T, r *nflogReader) uint64 {
	t.Helper()
	var st unix.Stat_t
	var serr error
	must(t, r.rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }))
	must(t, serr)
	b, err := os.ReadFile("/proc/thread-self/net/netlink")
	must(t, err)
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 10 && f[9] == strconv.FormatUint(st.Ino, 10) {
			n, err := strconv.ParseUint(f[8], 10, 64)
			must(t, err)
			return n
		}
	}
	t.Fatalf("no socket with inode %d in /proc/thread-self/net/netlink", st.Ino)
	return 0
}

func readerGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "(*nflogReader).run(")
}

// TestSpoofedDecision: a packet the sandbox sends from an address that is
// not its own is dropped without an answer, counted, and reported as a
// decision naming the forged source.
func TestSpoofedDecision(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	s := e.attach("sb-spoofedaaaaaaaaa", policy.Policy{})
	forged := netip.MustParseAddr("10.77.0.9")
	from := e.decided.len()
	dst := netip.AddrPortFrom(internet1, echoPort)
	// A first packet from the sandbox's own address learns the gateway's
	// link address (the host answers no ARP from a spoofed source).
	if _, err := udpAsk(s.NetnsPath, dst, "hello", time.Second); err != nil {
		t.Fatalf("an honest packet: %v", err)
	}
	err := inNetns(s.NetnsPath, func() error {
		link, err := netlink.LinkByName(s.SandboxLink)
		if err != nil {
			return err
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: forged.AsSlice(), Mask: net.CIDRMask(32, 32)}}
		if err := netlink.AddrAdd(link, addr); err != nil {
			return err
		}
		c, err := net.DialUDP("udp4", &net.UDPAddr{IP: forged.AsSlice()}, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("spoofed"))
		return err
	})
	must(t, err)
	want := policy.Decision{SandboxID: s.ID, Proto: "udp", Dst: dst.Addr(), Port: dst.Port(),
		Reason: DeniedSpoofed + " source " + forged.String(), Via: "nftables"}
	if _, ok := e.decided.wait(from, want); !ok {
		t.Errorf("no decision %+v; got %v", want, e.decided.of(s.ID, from))
	}
	if n := e.waitCount(t, s.ID, DeniedSpoofed, 1); n < 1 {
		t.Errorf("spoofed counter = %d", n)
	}
}
