package selftest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"corral/internal/selftest/probe"
)

// The selftest's own world: one network namespace joined to the host by a
// veth, holding every address a sandbox is tried against, each served by
// a listener that records who reached it.
//
//	internet  198.51.100.21 (TEST-NET-2): a main-table /32 route, since the
//	          daemon's egress proxy connects from the host itself
//	internal  10.255.77.10 (a private range) and 169.254.169.254 (the
//	          metadata address): routed into the namespace only for
//	          packets from the selftest's sandboxes (ip rules on their
//	          addresses), so the host's own traffic to those addresses,
//	          such as a cloud agent's, is never diverted
//
// Nothing a sandbox sends in these cases leaves the machine unless the
// daemon's proxy itself connects to an internal address, which the
// metadata and internal cases detect (the reply is not the fake's).
const (
	internetAddr  = "198.51.100.21"
	internalAddr  = "10.255.77.10"
	metadataAddr  = "169.254.169.254"
	worldHostGW   = "198.51.100.254"
	worldTCPPort  = 80
	worldUDPPort  = 5353
	worldHoldPort = 81 // TCP connections held open until the client closes
	ruleTable     = 7737
	rulePriority  = 7737
)

// world is the fake internet and internal network, and the record of what
// reached them.
type world struct {
	tag    string // names: namespace cst-<tag>, host veth cst<tag>
	ns     string
	link   string
	seen   *recorder
	cancel context.CancelFunc
	srv    *exec.Cmd
	mu     sync.Mutex // guards rules: sessions and their lanes create sandboxes at once
	rules  []string   // sandbox addresses with ip rules
	undo   []func()
	probe  string
	logf   func(string, ...any)
	closed bool
}

// recorder keeps every Seen line of a listener.
type recorder struct {
	mu   sync.Mutex
	seen []probe.Seen
}

func (r *recorder) add(s probe.Seen) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, s)
}

// matching returns what was seen whose payload holds token.
func (r *recorder) matching(token string) []probe.Seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []probe.Seen
	for _, s := range r.seen {
		if strings.Contains(s.Payload, token) {
			out = append(out, s)
		}
	}
	return out
}

func randomTag(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newWorld builds the namespace, its addresses and routes, and starts the
// listener (the probe binary's listen, run in the namespace).
func newWorld(ctx context.Context, probeBin string, logf func(string, ...any)) (w *world, err error) {
	w = &world{tag: randomTag(3), seen: &recorder{}, probe: probeBin, logf: logf}
	w.ns, w.link = "cst-"+w.tag, "cst"+w.tag
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	steps := [][]string{
		{"netns", "add", w.ns},
		{"link", "add", w.link, "type", "veth", "peer", "name", "w0", "netns", w.ns},
		// The host's side is a /32: the world is beyond a router, not
		// on the host's LAN, which the daemon denies.
		{"addr", "add", worldHostGW + "/32", "dev", w.link},
		{"link", "set", w.link, "up"},
		{"-n", w.ns, "link", "set", "lo", "up"},
		{"-n", w.ns, "addr", "add", internetAddr + "/24", "dev", "w0"},
		{"-n", w.ns, "addr", "add", internalAddr + "/32", "dev", "w0"},
		{"-n", w.ns, "addr", "add", metadataAddr + "/32", "dev", "w0"},
		{"-n", w.ns, "link", "set", "w0", "up"},
		{"-n", w.ns, "route", "add", worldHostGW + "/32", "dev", "w0"},
		{"-n", w.ns, "route", "add", "default", "via", worldHostGW},
		{"route", "add", internetAddr + "/32", "dev", w.link, "src", worldHostGW},
		{"route", "add", internalAddr + "/32", "dev", w.link, "table", fmt.Sprint(ruleTable)},
		{"route", "add", metadataAddr + "/32", "dev", w.link, "table", fmt.Sprint(ruleTable)},
	}
	w.undo = append(w.undo, func() { _ = exec.Command("ip", "netns", "del", w.ns).Run() })
	w.undo = append(w.undo, func() { _ = exec.Command("ip", "link", "del", w.link).Run() })
	w.undo = append(w.undo, func() { _ = exec.Command("ip", "route", "flush", "table", fmt.Sprint(ruleTable)).Run() })
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return nil, err
		}
	}
	return w, w.serve(ctx)
}

// serve starts the namespace's listener and waits for it to be ready.
func (w *world) serve(ctx context.Context) error {
	args := probe.ListenArgs{
		TCP: []string{fmt.Sprintf(":%d", worldTCPPort)}, UDP: []string{fmt.Sprintf(":%d", worldUDPPort)},
		Hold: []string{fmt.Sprintf(":%d", worldHoldPort)}, Label: "world-" + w.tag,
	}
	var err error
	w.srv, w.cancel, err = listenInNetns(ctx, w.ns, w.probe, args, w.seen)
	return err
}

// listenInNetns runs the probe's listen in namespace ns, recording what
// it sees in rec, and waits for it to be ready; cancel stops it (then
// wait for the command).
func listenInNetns(ctx context.Context, ns, probeBin string, a probe.ListenArgs, rec *recorder) (*exec.Cmd, context.CancelFunc, error) {
	args, _ := json.Marshal(a)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", ns, probeBin, probe.Cmd, "listen", string(args))
	out, err := srv.StdoutPipe()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("starting the listener in %s: %w", ns, err)
	}
	ready := make(chan struct{})
	go readSeen(out, rec, ready)
	select {
	case <-ready:
		return srv, cancel, nil
	case <-time.After(10 * time.Second):
		cancel()
		_ = srv.Wait()
		return nil, nil, fmt.Errorf("the listener in %s did not start", ns)
	}
}

// readSeen decodes a listener's lines into rec, closing ready at its
// ready line.
func readSeen(out interface{ Read([]byte) (int, error) }, rec *recorder, ready chan struct{}) {
	s := bufio.NewScanner(out)
	once := sync.Once{}
	for s.Scan() {
		line := s.Bytes()
		if strings.Contains(string(line), `"ready"`) {
			once.Do(func() { close(ready) })
			continue
		}
		var seen probe.Seen
		if json.Unmarshal(line, &seen) == nil {
			rec.add(seen)
		}
	}
}

// routeFrom sends addr's traffic to the internal and metadata addresses
// into the world (an ip rule: the host's own traffic is untouched).
func (w *world) routeFrom(addr string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.Contains(w.rules, addr) {
		return nil // a new sandbox in a slot a removed one held
	}
	if err := ip("rule", "add", "from", addr, "lookup", fmt.Sprint(ruleTable), "priority", fmt.Sprint(rulePriority)); err != nil {
		return err
	}
	w.rules = append(w.rules, addr)
	return nil
}

func (w *world) close() {
	if w.closed {
		return
	}
	w.closed = true
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.rules {
		_ = ip("rule", "del", "from", a, "lookup", fmt.Sprint(ruleTable), "priority", fmt.Sprint(rulePriority))
	}
	_ = ip("route", "del", internetAddr+"/32", "dev", w.link)
	if w.cancel != nil {
		w.cancel()
		_ = w.srv.Wait()
	}
	for i := len(w.undo) - 1; i >= 0; i-- {
		w.undo[i]()
	}
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// hostAddrs lists the host's IPv4 addresses, loopback and the world's own
// left out.
func hostAddrs() []string {
	var out []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() || ipn.IP.String() == worldHostGW {
			continue
		}
		out = append(out, ipn.IP.String())
	}
	return out
}
