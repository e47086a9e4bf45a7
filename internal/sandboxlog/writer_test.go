package sandboxlog

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/audit"
	"corral/internal/netpolicy/policy"
	"corral/internal/records"
	"corral/internal/seal"
)

// env is a writer on a real store and audit trail, with a clock the test
// moves.
type env struct {
	st    *records.Store
	trail *audit.Trail
	w     *Writer
	mu    sync.Mutex
	now   time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	st, err := records.Open(ctx, filepath.Join(t.TempDir(), "corral.db"), seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tr, err := audit.Open(ctx, audit.Config{Store: st, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{st: st, trail: tr, now: t0}
	e.w = Open(Config{Records: st, Trail: tr, Log: slog.New(slog.DiscardHandler), now: e.clock})
	t.Cleanup(tr.Close)
	return e
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

// close writes everything and returns the sandbox's events and audit
// entries.
func (e *env) close(t *testing.T, id string) ([]records.Event, []audit.Entry) {
	t.Helper()
	e.w.Close()
	if err := e.trail.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, err := e.st.Events(context.Background(), id, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	es, err := e.trail.Query(context.Background(), audit.Filter{SandboxID: id, Limit: audit.MaxPage})
	if err != nil {
		t.Fatal(err)
	}
	return evs, es
}

// TestPortFloodBounded: 10,000 connections to an exposed port, each
// naming a 64 KiB path, keep the burst in detail (capped) and fold the
// rest into one report that counts them all; milestones and API calls
// share the budget; the bytes kept stay under the documented bound.
func TestPortFloodBounded(t *testing.T) {
	e := newEnv(t)
	ctx := audit.WithCaller(context.Background(), "token:abc")
	path := "/" + strings.Repeat("x", 64<<10)
	const n = 10000
	for i := 0; i < n; i++ {
		e.w.Event(context.Background(), "sb", "port_connection", "exposed port connection",
			map[string]string{"port": "8000", "remote": "127.0.0.1:1", "request": "GET " + path})
	}
	e.w.Milestone(ctx, "sb", "paused", "sandbox paused", nil)
	e.w.Record("api", "sb", "token:abc", map[string]string{"method": "POST", "path": "/v1/sandboxes/sb/pause"})
	e.w.Audit(ctx, "exec", "sb", map[string]string{"argv": `["sh","-c","true"]`})
	evs, es := e.close(t, "sb")

	detailed, folded, paused, bytes := 0, 0, 0, 0
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		bytes += len(b)
		switch ev.Kind {
		case "port_connection":
			detailed++
			if len(ev.Fields["request"]) > MaxValue || ev.Fields["request_len"] != strconv.Itoa(len(path)+4) {
				t.Fatalf("a stored request: %d bytes, len %q", len(ev.Fields["request"]), ev.Fields["request_len"])
			}
		case "paused":
			paused++
		case "limit_reached":
			k, _ := strconv.Atoi(ev.Fields["folded"])
			folded += k
			if !strings.Contains(ev.Fields["kinds"], "port_connection ×") || !strings.Contains(ev.Fields["top"], "port_connection :8000") {
				t.Errorf("fold %v", ev.Fields)
			}
		}
	}
	if detailed != Burst || paused != 1 || detailed+folded != n+2 {
		t.Errorf("%d detailed, %d folded (of %d and an API call and an exec), %d paused", detailed, folded, n, paused)
	}
	kinds := map[string]int{}
	for _, en := range es {
		b, _ := json.Marshal(en)
		bytes += len(b)
		kinds[en.Kind]++
	}
	if kinds["port_connection"] != Burst || kinds["pause"] != 1 || kinds["limit_reached"] != 1 {
		t.Errorf("audit entries by kind %v", kinds)
	}
	// Burst events and entries of at most a record's size, a fold report
	// (twice) and the milestone (twice).
	if bound := 2*(Burst+1)*MaxRecordBytes + 2*MaxReportBytes; bytes > bound {
		t.Errorf("%d bytes kept, bound %d", bytes, bound)
	}
	t.Logf("%d requests kept as %d events and %d audit entries, %d bytes", n, len(evs), len(es), bytes)
}

// TestProbeInFloodKept: a flood of random names empties the bucket, and a
// probe of the metadata address in the middle is still an event of its own.
func TestProbeInFloodKept(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 3000; i++ {
		e.w.Decision(policy.Decision{SandboxID: "sb", Allowed: true, Proto: "dns", Via: "dns", Domain: "q" + strconv.Itoa(i) + ".rnd" + strconv.Itoa(i) + ".test"})
		if i == 1500 {
			e.w.Decision(policy.Decision{SandboxID: "sb", Proto: "tcp", Via: "nftables", Dst: netip.MustParseAddr("169.254.169.254"), Port: 80, Reason: "internal range"})
		}
	}
	evs, _ := e.close(t, "sb")
	probe, dns, folded := 0, 0, 0
	for _, ev := range evs {
		switch {
		case ev.Kind == "egress_denied" && ev.Fields["dst"] == "169.254.169.254":
			probe++
		case ev.Kind == "egress_allowed":
			dns++
		case ev.Kind == "limit_reached":
			folded, _ = strconv.Atoi(ev.Fields["folded"])
		}
	}
	if probe != 1 || dns+folded != 3000 {
		t.Errorf("probe events %d, dns %d detailed + %d folded of 3000", probe, dns, folded)
	}
}

// TestRefusalInFloodKept: a fair-share refusal (a decision with a Limit,
// and a limit_reached event from a caller) after a flood that spent the
// burst is written in detail, not folded (TestFairShareEgress missed one
// in a CI run).
func TestRefusalInFloodKept(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 500; i++ {
		e.w.Decision(policy.Decision{SandboxID: "sb", Allowed: true, Proto: "tcp", Via: "proxy", Dst: netip.MustParseAddr("198.51.100.1"), Port: 80})
	}
	e.w.Decision(policy.Decision{SandboxID: "sb", Proto: "tcp", Via: "proxy", Limit: "per_sandbox", LimitMax: 64, Refused: 3})
	e.w.Event(context.Background(), "sb", "limit_reached", "port connections refused", map[string]string{"resource": "port_connections", "limit": "shared"})
	evs, _ := e.close(t, "sb")
	got := map[string]bool{}
	for _, ev := range evs {
		if ev.Kind == "limit_reached" && ev.Fields["resource"] != "trail" {
			got[ev.Fields["resource"]+" "+ev.Fields["limit"]] = true
		}
	}
	if !got["egress_connections per_sandbox"] || !got["port_connections shared"] {
		t.Errorf("refusals written in detail: %v, want both", got)
	}
}

// TestEnderNamed: the terminate entry names who asked for the end, not
// the teardown's empty context.
func TestEnderNamed(t *testing.T) {
	e := newEnv(t)
	e.w.Ender(audit.WithCaller(context.Background(), "token:who"), "sb")
	e.w.Committed(context.Background(), "sb", "terminated", "sandbox terminated", map[string]string{})
	_, es := e.close(t, "sb")
	if len(es) != 1 || es[0].Kind != "terminate" || es[0].Caller != "token:who" {
		t.Fatalf("entries %+v", es)
	}
}

// TestLogBudget: lines naming a sandbox (as an attribute, or through
// With) are held to its budget; others pass; the held-back lines are
// told once their window ends.
func TestLogBudget(t *testing.T) {
	var buf bytes.Buffer
	lb := NewLogBudget(slog.NewTextHandler(&buf, nil))
	log := slog.New(lb)
	for i := 0; i < 1000; i++ {
		log.Info("dns forward failed", "sandbox", "sb-a", "name", "x")
		log.With("op", "egress").With("sandbox", "sb-b").Info("dialing")
		log.Info("daemon line")
	}
	log.WithGroup("g").Info("grouped", "sandbox", "sb-c")
	out := buf.String()
	if got := strings.Count(out, "sandbox=sb-a"); got != LogBurst {
		t.Errorf("%d lines of sb-a, want %d", got, LogBurst)
	}
	if got := strings.Count(out, "sandbox=sb-b"); got != LogBurst {
		t.Errorf("%d lines of sb-b, want %d", got, LogBurst)
	}
	if got := strings.Count(out, "daemon line"); got != 1000 {
		t.Errorf("%d daemon lines", got)
	}
	buf.Reset()
	lb.tell(time.Now(), true)
	if !strings.Contains(buf.String(), "sandbox=sb-a held=950") || !strings.Contains(buf.String(), "sandbox=sb-b held=950") {
		t.Errorf("telling: %s", buf.String())
	}
	buf.Reset()
	lb.tell(time.Now(), true)
	if buf.Len() != 0 {
		t.Errorf("told twice: %s", buf.String())
	}
}
