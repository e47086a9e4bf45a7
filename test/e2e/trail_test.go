package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"corral/internal/netpolicy/dnsd"
	"corral/internal/sandboxlog"
	"corral/pkg/apiv1"
)

// TestTrailFlood: what a sandbox can make the host keep is bounded by its
// one trail budget (internal/sandboxlog), whatever the door. One daemon,
// whose upstream resolver is a fake in the test's "internet" namespace
// (slow.test names it never answers), serves each flood in a sandbox of
// its own:
//   - a flood of distinct made-up names with one probe of the metadata
//     address in the middle: the probe is an event of its own, detailed plus
//     folded is every decision, the upstream saw no more than the
//     resolver's per-sandbox rate;
//   - 10,000 connections to a public exposed port, each naming a 4 KiB
//     path: the bytes kept stay within the budget, and the folds count
//     every connection;
//   - a flood of names the upstream never answers: the daemon's log names
//     the sandbox a bounded number of times;
//   - the event log pages to its end.
func TestTrailFlood(t *testing.T) {
	// Not parallel: its floods load the host, and its budgets are measured against time.
	w := newWorld(t)
	up := slowUpstream(t, w.inetNS)
	var log lockedBuffer
	d := startDaemonTee(t, &log, "--dns-upstream", up.addr)

	// The floods run side by side, each in a sandbox of its own (the
	// budgets are per sandbox), so their waits for a window to end overlap.
	t.Run("dns flood and a metadata probe", func(t *testing.T) { t.Parallel(); dnsFlood(t, d, up) })
	t.Run("port flood", func(t *testing.T) { t.Parallel(); portFlood(t, d) })
	t.Run("slow upstream", func(t *testing.T) { t.Parallel(); slowFlood(t, d, &log) })
}

// dnsFlood: 8 s of distinct names at the resolver, waiting for each
// answer, with one TCP probe of 169.254.169.254:80 (the world's fake) in
// the middle.
func dnsFlood(t *testing.T, d *daemon, up *fakeUpstream) {
	id := d.create()
	d.mustCLI("fs", "put", id, "testdata/dns_flood.py", "/srv/flood.py")
	before := up.named.Load()
	const secs = 8
	start := time.Now()
	res := runFlood(t, d, id, strconv.Itoa(secs), "fast", metadataAddr)
	forwarded := up.named.Load() - before
	answered := 0
	for _, rc := range []string{"0", "2", "3", "5"} {
		answered += res.Rcodes[rc]
	}
	t.Logf("flood: %d queries, answers by rcode %v; the upstream saw %d", res.Sent, res.Rcodes, forwarded)
	if answered < 2*sandboxlog.Burst {
		t.Fatalf("only %d queries answered: not a flood", answered)
	}
	if bound := int64(dnsd.DefaultUpstreamBurst + (time.Since(start).Seconds()+1)*dnsd.DefaultUpstreamRate); forwarded > bound {
		t.Errorf("the upstream saw %d queries from one sandbox in %s, over its rate (bound %d)", forwarded, time.Since(start).Round(time.Second), bound)
	}
	if res.Rcodes["5"] == 0 {
		t.Errorf("no query answered REFUSED: the upstream rate did not apply")
	}
	tr := readTrail(t, d, id, start)
	if tr.detailed["dns"]+tr.folded < answered || tr.detailed["dns"]+tr.folded > res.Sent+10 {
		t.Errorf("detailed %d + folded %d, want between the %d answered and the %d sent: decisions lost or invented", tr.detailed["dns"], tr.folded, answered, res.Sent)
	}
	if tr.probe == 0 {
		t.Errorf("the probe of %s:80 is not an event of its own (folds: %q)", metadataAddr, tr.protected)
	}
	tr.checkBound(t)
}

// portFlood: 10,000 connections to a public port through the API's port
// path, 16 at a time, each asking a 4 KiB path.
func portFlood(t *testing.T, d *daemon) {
	id := d.create("--expose-public", "8000")
	d.mustCLI("exec", "-d", id, "--", "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1")
	waitServing(t, d, id)
	dbBefore := dbSize(d)
	start := time.Now()
	const n, workers = 10000, 16
	url := "http://" + d.addr + "/v1/sandboxes/" + id + "/ports/8000/" + strings.Repeat("p", 4096)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= n {
				resp, err := client.Get(url)
				if err != nil {
					failed.Add(1)
					continue
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d connections in %s (%d failed at the client)", n, time.Since(start).Round(time.Millisecond), failed.Load())
	tr := readTrail(t, d, id, start)
	conns := tr.detailed["port_connection"] + tr.kinds["port_connection"]
	if conns < n-int(failed.Load()) || conns > n {
		t.Errorf("%d detailed + %d folded port connections, want the %d made", tr.detailed["port_connection"], tr.kinds["port_connection"], n)
	}
	if max := sandboxlog.Burst + int(tr.elapsed.Seconds()+1)*sandboxlog.Rate; tr.detailed["port_connection"] > max || tr.folded == 0 {
		t.Errorf("%d port connections in detail (bound %d in %s), %d folded", tr.detailed["port_connection"], max, tr.elapsed.Round(time.Second), tr.folded)
	}
	tr.checkBound(t)
	t.Logf("the database grew %d bytes (with its write-ahead log, and the other floods beside it)", dbSize(d)-dbBefore)
	t.Run("events page to the end", func(t *testing.T) { eventsPaged(t, d, id, tr.events) })
}

// slowFlood: 10 s of names the upstream never answers, 50 a second: every
// forward fails after the resolver's timeout, and the daemon's log names
// the sandbox within its log budget.
func slowFlood(t *testing.T, d *daemon, log *lockedBuffer) {
	id := d.create()
	d.mustCLI("fs", "put", id, "testdata/dns_flood.py", "/srv/flood.py")
	mark := log.Len()
	start := time.Now()
	res := runFlood(t, d, id, "10", "slow", "50")
	elapsed := time.Since(start)
	time.Sleep(sandboxlog.Window + 2*time.Second) // the held-back lines are told once their window ends
	lines := strings.Count(log.From(mark), id)
	t.Logf("slow flood: %d queries, answers by rcode %v; %d log lines name the sandbox in %s", res.Sent, res.Rcodes, lines, elapsed.Round(time.Second))
	if res.Rcodes["2"]+res.Rcodes["5"] == 0 {
		t.Fatalf("no query failed: the upstream was not slow")
	}
	secs := elapsed.Seconds() + sandboxlog.Window.Seconds() + 2
	if bound := sandboxlog.LogBurst + int(secs*sandboxlog.LogRate) + int(secs/sandboxlog.Window.Seconds()) + 2; lines > bound {
		t.Errorf("%d log lines name the sandbox in %.0f s, over its log budget (%d)", lines, secs, bound)
	}
	if !strings.Contains(log.From(mark), "sandbox log lines held back") {
		t.Errorf("no line tells the held-back lines")
	}
}

type floodResult struct {
	Sent   int            `json:"sent"`
	Rcodes map[string]int `json:"rcodes"`
}

func runFlood(t *testing.T, d *daemon, id string, args ...string) floodResult {
	t.Helper()
	out := d.mustCLI(append([]string{"exec", id, "--", "python3", "/srv/flood.py"}, args...)...)
	var res floodResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("the flood's report %q: %v", out, err)
	}
	return res
}

// trail is what a sandbox's event log and audit entries hold after a
// flood.
type trail struct {
	events    int
	evBytes   int
	auditLen  int
	detailed  map[string]int // egress decisions by proto, and other kinds
	kinds     map[string]int // folded, by kind
	folded    int
	folds     int
	probe     int
	protected string
	elapsed   time.Duration
}

// readTrail waits for the last fold window to end and reads sandbox id's
// events and audit entries.
func readTrail(t *testing.T, d *daemon, id string, start time.Time) trail {
	t.Helper()
	time.Sleep(sandboxlog.Window + 2*time.Second)
	evs, err := d.client.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	tr := trail{events: len(evs), detailed: map[string]int{}, kinds: map[string]int{}, elapsed: time.Since(start)}
	for _, e := range evs {
		b, _ := json.Marshal(e)
		tr.evBytes += len(b)
		tr.add(e)
	}
	status, audit := d.api("GET", "/v1/audit/export?sandbox="+id, d.token, "")
	if status != http.StatusOK {
		t.Fatalf("audit export: %d %s", status, audit)
	}
	tr.auditLen = len(audit)
	t.Logf("trail: %d events (%d bytes), %d audit bytes; detailed %v; folded %d in %d folds, by kind %v",
		tr.events, tr.evBytes, tr.auditLen, tr.detailed, tr.folded, tr.folds, tr.kinds)
	return tr
}

func (tr *trail) add(e apiv1.Event) {
	switch {
	case strings.HasPrefix(e.Kind, "egress_"):
		tr.detailed[e.Fields["proto"]]++
		if e.Kind == "egress_denied" && e.Fields["dst"] == metadataAddr && e.Fields["port"] == "80" {
			tr.probe++
		}
	case e.Kind == "limit_reached" && e.Fields["resource"] == "trail":
		n, _ := strconv.Atoi(e.Fields["folded"])
		tr.folded += n
		tr.folds++
		tr.protected += e.Fields["protected"]
		for _, part := range strings.Split(e.Fields["kinds"], "; ") {
			k, c, ok := strings.Cut(part, " ×")
			if n, err := strconv.Atoi(c); ok && err == nil {
				tr.kinds[k] += n
			}
		}
	default:
		tr.detailed[e.Kind]++
	}
}

// checkBound: the events and the audit entries each stay within the
// budget docs/SECURITY.md states: the burst and the rate of detailed
// records, the evidence past them, and a fold report a window, plus the
// sandbox's few own records (create, exec, files).
func (tr *trail) checkBound(t *testing.T) {
	t.Helper()
	windows := int(tr.elapsed/sandboxlog.Window) + 2
	records := sandboxlog.Burst + int(tr.elapsed.Seconds()+1)*sandboxlog.Rate + windows*sandboxlog.EvidencePerWindow + 20
	bound := records*sandboxlog.MaxRecordBytes + windows*sandboxlog.MaxReportBytes
	if tr.evBytes > bound || tr.auditLen > bound {
		t.Errorf("events %d bytes, audit %d bytes in %s: over the budget's %d", tr.evBytes, tr.auditLen, tr.elapsed.Round(time.Second), bound)
	}
	if tr.folds == 0 || tr.folded == 0 {
		t.Errorf("no fold: the flood was not bounded")
	}
}

// dbSize is the daemon's database with its write-ahead log, in bytes.
func dbSize(d *daemon) int64 {
	var n int64
	for _, f := range []string{"corral.db", "corral.db-wal"} {
		if fi, err := os.Stat(filepath.Join(d.state, f)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// eventsPaged pages sandbox id's event log 100 at a time to its end and
// checks `corral events` prints it whole.
func eventsPaged(t *testing.T, d *daemon, id string, total int) {
	seen, after := 0, "0"
	for {
		status, body := d.api("GET", "/v1/sandboxes/"+id+"/events?limit=100&after="+after, d.token, "")
		var page struct {
			Events []json.RawMessage `json:"events"`
			Next   int64             `json:"next"`
		}
		if err := json.Unmarshal([]byte(body), &page); status != 200 || err != nil {
			t.Fatalf("page after %s: %d %s", after, status, body)
		}
		seen += len(page.Events)
		if page.Next == 0 {
			break
		}
		if len(page.Events) != 100 {
			t.Fatalf("a page of %d events with a next", len(page.Events))
		}
		after = strconv.FormatInt(page.Next, 10)
	}
	if seen < total {
		t.Errorf("paged %d events, the log holds %d", seen, total)
	}
	if status, body := d.api("GET", "/v1/sandboxes/"+id+"/events?limit=1001", d.token, ""); status != 400 || !strings.Contains(body, "limit") {
		t.Errorf("limit=1001: %d %s", status, body)
	}
	if status, body := d.api("GET", "/v1/sandboxes/"+id+"/events?after=x", d.token, ""); status != 400 || !strings.Contains(body, "after") {
		t.Errorf("after=x: %d %s", status, body)
	}
	if lines := strings.Count(d.mustCLI("events", id), "\n"); lines < total {
		t.Errorf("corral events printed %d lines, want at least %d", lines, total)
	}
	if got := strings.Count(d.mustCLI("events", "--limit", "5", id), "\n"); got != 5 {
		t.Errorf("corral events --limit 5 printed %d lines", got)
	}
}

// fakeUpstream is an upstream resolver in the test's "internet"
// namespace: names under slow.test are never answered, every other name
// is NXDOMAIN; it counts the queries for the latter (named).
type fakeUpstream struct {
	addr  string
	named atomic.Int64
}

func slowUpstream(t *testing.T, ns string) *fakeUpstream {
	up := &fakeUpstream{addr: net.JoinHostPort(inetAddr2, "53")}
	var pc net.PacketConn
	inNS(t, ns, func() (err error) {
		pc, err = net.ListenPacket("udp", up.addr)
		return err
	})
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		if len(q.Question) == 1 && strings.HasSuffix(strings.ToLower(q.Question[0].Name), ".slow.test.") {
			return
		}
		up.named.Add(1)
		m := new(dns.Msg)
		m.SetRcode(q, dns.RcodeNameError)
		_ = w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return up
}
