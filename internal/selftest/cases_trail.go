package selftest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"corral/pkg/apiv1"
)

// The resolver's rate of queries a sandbox forwards upstream, and the log
// budget of a sandbox (dnsd.DefaultUpstreamBurst and Rate,
// sandboxlog.LogBurst and LogRate: a test keeps them equal).
const (
	upstreamBurst = 100
	upstreamRate  = 20
	logBurst      = 50
	logRate       = 0.2
	// maxFieldBytes is sandboxlog.MaxValue: what a stored field keeps of
	// a longer value.
	maxFieldBytes = 256
)

// dnsFlooder asks the sandbox's resolver for argv[2] seconds, waiting for
// each answer, for distinct names under invalid. (RFC 6761: never a real
// name), and once, halfway, opens a TCP connection to argv[3]:80 when it is
// set. It prints the answers by response code as JSON.
const dnsFlooder = `
import json, random, socket, struct, sys, time
secs = float(sys.argv[1]); probe = sys.argv[2] if len(sys.argv) > 2 else ""
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.5)
tag = "%06x" % random.randrange(1 << 24); rc = {}; i = 0; probed = not probe
end = time.time() + secs
while time.time() < end:
    i += 1; qid = random.randrange(65536)
    name = b"".join(bytes([len(p)]) + p for p in (b"r%d-%s" % (i, tag.encode()), b"invalid")) + b"\0"
    s.sendto(struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1), (ns, 53))
    try:
        while True:
            d = s.recv(4096)
            if struct.unpack(">H", d[:2])[0] == qid:
                rc[str(d[3] & 15)] = rc.get(str(d[3] & 15), 0) + 1; break
    except socket.timeout:
        rc["timeout"] = rc.get("timeout", 0) + 1
    if not probed and time.time() > end - secs / 2:
        probed = True; c = socket.socket(); c.settimeout(2)
        try: c.connect((probe, 80))
        except OSError: pass
        c.close()
print(json.dumps(rc))
`

// runDNSFlood floods from the attacker for secs (with a probe of addr
// when set) and returns the answers by response code.
func (s *session) runDNSFlood(ctx context.Context, secs int, addr string) (map[string]int, error) {
	cmd := []string{"python3", "-c", dnsFlooder, strconv.Itoa(secs)}
	if addr != "" {
		cmd = append(cmd, addr)
	}
	var out strings.Builder
	if _, err := s.c.Run(ctx, s.a.id, apiv1.ExecRequest{Cmd: cmd, Timeout: float64(secs + 60)}, nil, &out, io.Discard); err != nil {
		return nil, err
	}
	rc := map[string]int{}
	if err := json.Unmarshal([]byte(out.String()), &rc); err != nil {
		return nil, fmt.Errorf("the flood's report %q: %w", out.String(), err)
	}
	return rc, nil
}

// lastSeq is the attacker's newest event's sequence number (0: none).
func (s *session) lastSeq(ctx context.Context) (int64, error) {
	evs, err := s.c.Events(ctx, s.a.id)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	return evs[len(evs)-1].Seq, nil
}

// hideProbeInFlood: the attacker floods its resolver with distinct names,
// filling its trail budget, and probes the metadata address in the
// middle, hoping the probe is folded into a count; it must stay an event
// of its own.
func hideProbeInFlood(ctx context.Context, s *session) Result {
	tried := fmt.Sprintf("flood the resolver with distinct names for 4 s, probing %s:80 halfway, to have the probe folded away", metadataAddr)
	after, err := s.lastSeq(ctx)
	if err != nil {
		return inconclusive(tried, err)
	}
	rc, err := s.runDNSFlood(ctx, 4, metadataAddr)
	if err != nil {
		return inconclusive(tried, err)
	}
	time.Sleep(trailWindow + 2*time.Second) // the window's fold is written once it ends
	evs, err := s.c.EventsAfter(ctx, s.a.id, after, 0)
	if err != nil {
		return inconclusive(tried, err)
	}
	detailed, folded, probe := 0, 0, 0
	for _, e := range evs {
		switch {
		case e.Kind == "egress_denied" && e.Fields["dst"] == metadataAddr:
			probe++
		case strings.HasPrefix(e.Kind, "egress_"):
			detailed++
		case e.Kind == "limit_reached" && e.Fields["resource"] == "trail":
			n, _ := strconv.Atoi(e.Fields["folded"])
			folded += n
		}
	}
	if folded == 0 {
		return inconclusive(tried, fmt.Errorf("nothing was folded (%d detailed, answers %v): the flood did not empty the budget", detailed, rc))
	}
	return verdict(probe > 0, tried, "%d decisions detailed, %d folded; the probe of %s is an event of its own %d time(s)", detailed, folded, metadataAddr, probe)
}

// exhaustDNSUpstream: the attacker floods its resolver with names that
// must be forwarded, to make the daemon hammer the operator's resolver
// and fill the daemon's log; the forwards stay within the per-sandbox rate
// (the rest REFUSED) and the log lines naming the sandbox within its log
// budget.
func exhaustDNSUpstream(ctx context.Context, s *session) Result {
	const secs = 3
	tried := fmt.Sprintf("ask the resolver for distinct names under invalid. for %d s, as fast as it answers", secs)
	var logStart int64 = -1
	if s.cfg.DaemonLog != "" {
		if fi, err := os.Stat(s.cfg.DaemonLog); err == nil {
			logStart = fi.Size()
		}
	}
	start := time.Now()
	rc, err := s.runDNSFlood(ctx, secs, "")
	if err != nil {
		return inconclusive(tried, err)
	}
	elapsed := time.Since(start)
	forwarded := rc["0"] + rc["2"] + rc["3"]
	bound := upstreamBurst + int((elapsed.Seconds()+1)*upstreamRate)
	if forwarded+rc["5"] < 2*bound {
		return inconclusive(tried, fmt.Errorf("only %d queries answered (%v): not a flood past the rate", forwarded+rc["5"], rc))
	}
	evidence := fmt.Sprintf("%d answered after a forward (bound %d in %s), %d refused", forwarded, bound, elapsed.Round(time.Second), rc["5"])
	ok := forwarded <= bound
	if logStart >= 0 {
		lines, err := linesNaming(s.cfg.DaemonLog, logStart, s.a.id)
		if err != nil {
			return inconclusive(tried, err)
		}
		logBound := logBurst + int(elapsed.Seconds()*logRate) + int(elapsed/trailWindow) + 2
		ok = ok && lines <= logBound
		evidence += fmt.Sprintf("; the daemon's log named the sandbox %d times (bound %d)", lines, logBound)
	} else {
		evidence += "; the daemon's log was not checked (--daemon-log)"
	}
	return verdict(ok, tried, "%s", evidence)
}

// linesNaming counts the lines of file from offset on that contain id.
func linesNaming(file string, offset int64, id string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, id) {
			n++
		}
	}
	return n, nil
}

// exhaustPortTrail: strangers open connections to the attacker's exposed
// port, each asking a long path, to grow the host's database by an event
// and an audit entry apiece; the detailed ones stay within the trail
// budget, each capped, and the rest are counted in folds.
func exhaustPortTrail(ctx context.Context, s *session) Result {
	const n, workers = 600, 16
	tried := fmt.Sprintf("open %d connections to the attacker's exposed port, each asking a 2 KiB path (past the burst of %d)", n, trailBurst)
	after, err := s.lastSeq(ctx)
	if err != nil {
		return inconclusive(tried, err)
	}
	if err := s.servePort(ctx); err != nil {
		return inconclusive(tried, err)
	}
	url := strings.TrimSuffix(s.c.BaseURL, "/") + "/v1/sandboxes/" + s.a.id + "/ports/8080/" + strings.Repeat("p", 2048)
	start := time.Now()
	var next, made atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= n && ctx.Err() == nil {
				if st, _, err := s.get(ctx, url, "", map[string]string{"X-Corral-Port-Token": s.a.rec.PortToken}); err == nil && st != http.StatusTooManyRequests {
					made.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(trailWindow + 2*time.Second)
	elapsed := time.Since(start)
	evs, err := s.c.EventsAfter(ctx, s.a.id, after, 0)
	if err != nil {
		return inconclusive(tried, err)
	}
	detailed, folded, uncapped := 0, 0, 0
	for _, e := range evs {
		switch {
		case e.Kind == "port_connection":
			detailed++
			if len(e.Fields["request"]) > maxFieldBytes {
				uncapped++
			}
		case e.Kind == "limit_reached" && e.Fields["resource"] == "trail":
			folded += kindCount(e.Fields["kinds"], "port_connection")
		}
	}
	bound := trailBound(elapsed)
	return verdict(detailed <= bound && uncapped == 0 && detailed+folded >= int(made.Load()), tried,
		"%d connections answered; %d kept in detail (bound %d in %s), %d of them uncapped; %d counted in folds",
		made.Load(), detailed, bound, elapsed.Round(time.Second), uncapped, folded)
}

// servePort makes sure something answers on the attacker's port 8080 (an
// earlier case may have started a server there).
func (s *session) servePort(ctx context.Context) error {
	url := strings.TrimSuffix(s.c.BaseURL, "/") + "/v1/sandboxes/" + s.a.id + "/ports/8080/"
	hdr := map[string]string{"X-Corral-Port-Token": s.a.rec.PortToken}
	if st, _, err := s.get(ctx, url, "", hdr); err == nil && st == http.StatusOK {
		return nil
	}
	start := apiv1.ExecRequest{Cmd: []string{"sh", "-c", "setsid python3 -m http.server 8080 >/dev/null 2>&1 &"}}
	if _, err := s.c.Run(ctx, s.a.id, start, nil, io.Discard, io.Discard); err != nil {
		return err
	}
	for i := 0; i < 100; i++ {
		if st, _, err := s.get(ctx, url, "", hdr); err == nil && st == http.StatusOK {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("nothing answers on the attacker's port 8080")
}

// kindCount reads kind's count from a fold's kinds field ("k ×n; ...").
func kindCount(kinds, kind string) int {
	for _, part := range strings.Split(kinds, "; ") {
		if k, c, ok := strings.Cut(part, " ×"); ok && k == kind {
			n, _ := strconv.Atoi(c)
			return n
		}
	}
	return 0
}
