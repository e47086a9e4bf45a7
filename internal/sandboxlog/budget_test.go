package sandboxlog

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"corral/internal/netpolicy/policy"
)

var t0 = time.Unix(1_800_000_000, 0)

// TestBudgetFolds: past the burst, records are folded; written plus
// folded is everything sent; the bucket refills at the rate; another
// sandbox has its own; a window's report says how many, of which kinds.
func TestBudgetFolds(t *testing.T) {
	b := newBudget()
	written := 0
	const sent = 5000
	for i := 0; i < sent; i++ {
		if b.take("sb-a", ordinary, t0) {
			written++
			continue
		}
		b.fold("sb-a", "port_connection", "port_connection :8000", false, t0)
	}
	if written != Burst {
		t.Fatalf("%d written of a burst, want %d", written, Burst)
	}
	if !b.take("sb-b", ordinary, t0) {
		t.Fatal("a quiet sandbox's first record was folded")
	}
	if !b.take("sb-a", milestone, t0) {
		t.Fatal("a milestone was folded")
	}
	if got := b.due(t0.Add(Window-time.Millisecond), false); len(got) != 0 {
		t.Fatalf("a report before the window ended: %+v", got)
	}
	reps := b.due(t0.Add(Window), false)
	if len(reps) != 1 || reps[0].sandbox != "sb-a" || reps[0].folded != sent-Burst {
		t.Fatalf("reports %+v", reps)
	}
	msg, f := reps[0].event()
	if f["folded"] != fmt.Sprint(sent-Burst) || f["resource"] != "trail" || !strings.Contains(f["kinds"], "port_connection ×4800") ||
		!strings.Contains(f["top"], "port_connection :8000 ×4800") || len(msg) > MaxReportBytes {
		t.Errorf("event %q %v", msg, f)
	}
	later, n := t0.Add(Window+10*time.Second), 0
	for i := 0; i < 100; i++ {
		if b.take("sb-a", ordinary, later) {
			n++
		}
	}
	if n != Rate*20 {
		t.Errorf("%d written after 20 s, want %d", n, Rate*20)
	}
}

// TestTopKeysSurviveAFlood: a key counted often stays named whatever
// stream of one-off keys comes with it, and the counts add up.
func TestTopKeysSurviveAFlood(t *testing.T) {
	w := newWindow(t0)
	for i := 0; i < 20000; i++ {
		w.add("egress_allowed", fmt.Sprintf("allowed dns *.rnd%d.test", i), false)
		if i%10 == 0 {
			w.add("egress_denied", "denied tcp 203.0.113.9:25 (not in cidr_allowlist)", false)
		}
	}
	r := w.report("sb", t0.Add(Window))
	if len(r.top) == 0 || r.top[0].key != "denied tcp 203.0.113.9:25 (not in cidr_allowlist)" || r.top[0].n-r.top[0].over > 2000 || r.top[0].n < 2000 {
		t.Fatalf("top %+v", r.top[:min(3, len(r.top))])
	}
	if len(r.top) > TopKeys {
		t.Errorf("%d keys named", len(r.top))
	}
	_, f := r.event()
	if !strings.Contains(f["top"], "others ×") || r.folded != 22000 {
		t.Errorf("folded %d; top %s", r.folded, f["top"])
	}
}

// TestEvidenceNeverFoldedAway: with the bucket empty, a denial toward a
// protected destination is still written, up to its own bound a window;
// past that its destination is named in the fold, beside the flood's.
func TestEvidenceNeverFoldedAway(t *testing.T) {
	b := newBudget()
	for b.take("sb", ordinary, t0) {
	}
	probe := policy.Decision{SandboxID: "sb", Proto: "tcp", Via: "nftables", Dst: netip.MustParseAddr("169.254.169.254"), Port: 80, Reason: "internal range"}
	r := decisionRecord(probe, nil)
	if r.class != evidence || !b.take("sb", r.class, t0) {
		t.Fatalf("a metadata probe with the bucket empty: class %v, not written", r.class)
	}
	host := probe
	host.Dst = netip.MustParseAddr("192.0.2.2")
	if decisionRecord(host, nil).class == evidence {
		t.Fatal("a public address is evidence without Protected")
	}
	if decisionRecord(host, func(a netip.Addr) bool { return a == host.Dst }).class != evidence {
		t.Fatal("the host's address is not evidence")
	}
	allowed := probe
	allowed.Allowed = true
	if decisionRecord(allowed, nil).class == evidence {
		t.Fatal("an allowed decision is evidence")
	}
	for i := 1; i < EvidencePerWindow; i++ {
		if !b.take("sb", evidence, t0) {
			t.Fatalf("evidence %d of %d folded", i, EvidencePerWindow)
		}
	}
	if b.take("sb", evidence, t0) {
		t.Fatal("evidence past its bound written")
	}
	b.fold("sb", r.kind, r.key, true, t0)
	for i := 0; i < 5000; i++ {
		b.fold("sb", "egress_allowed", fmt.Sprintf("allowed dns r%d.test", i), false, t0)
	}
	for i := 0; i < 100; i++ {
		b.fold("sb", "egress_denied", fmt.Sprintf("denied tcp 10.0.%d.1:80 (internal range)", i), true, t0)
	}
	reps := b.due(t0.Add(Window), false)
	if len(reps) != 1 {
		t.Fatalf("reports %+v", reps)
	}
	_, f := reps[0].event()
	if !strings.Contains(f["protected"], "169.254.169.254:80") || !strings.Contains(f["protected"], "other protected destinations ×69") {
		t.Errorf("protected %q", f["protected"])
	}
	if b.take("sb", evidence, t0.Add(Window)) != true {
		t.Error("a new window gives evidence its allowance back")
	}
}

// TestBudgetForgets: a quiet sandbox's account goes; Close's report
// comes before its window ends.
func TestBudgetForgets(t *testing.T) {
	b := newBudget()
	b.take("sb-a", ordinary, t0)
	b.fold("sb-b", "exec", "exec by x sh", false, t0)
	if reps := b.due(t0.Add(time.Second), true); len(reps) != 1 {
		t.Fatalf("every report at close: %+v", reps)
	}
	b.due(t0.Add(time.Hour), false)
	if len(b.accounts) != 0 {
		t.Fatalf("accounts %v", b.accounts)
	}
}

func TestFoldDomain(t *testing.T) {
	for in, want := range map[string]string{"a.b.flood.test": "*.flood.test", "flood.test": "flood.test", "x": "x", "a.example.com.": "*.example.com"} {
		if got := foldDomain(in); got != want {
			t.Errorf("foldDomain(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCaps: a long value is cut with its length and hash beside it; past
// MaxFields, fields are dropped and counted; the message is cut at a rune.
func TestCaps(t *testing.T) {
	long := "GET /" + strings.Repeat("a", 65536)
	f := map[string]string{"request": long, "port": "8000"}
	msg, got := capRecord(strings.Repeat("é", 1000), f)
	if len(msg) > MaxMessage || !strings.HasSuffix(msg, "…") || strings.ContainsRune(msg, '\uFFFD') {
		t.Errorf("message %d bytes", len(msg))
	}
	if len(got["request"]) > MaxValue || got["request_len"] != "65541" || len(got["request_sha256"]) != 16 || got["port"] != "8000" {
		t.Errorf("capped %v", got)
	}
	if len(f["request"]) != len(long) {
		t.Error("the caller's map changed")
	}
	many := map[string]string{}
	for i := 0; i < 40; i++ {
		many[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", 200)
	}
	_, got = capRecord("", many)
	if got["k00"] != many["k00"] || got["fields_dropped"] == "" || len(got["k39"]) != 0 {
		t.Errorf("%d fields kept, dropped %q", len(got), got["fields_dropped"])
	}
	hostile := map[string]string{}
	for i := 0; i < 40; i++ {
		hostile[fmt.Sprintf("key_of_thirty_two_bytes_long_%02d", i)] = strings.Repeat("<\x01\xff", 30000)
	}
	m, capped := capRecord(strings.Repeat("<", 10000), hostile)
	b, _ := json.Marshal(struct {
		Msg    string            `json:"message"`
		Fields map[string]string `json:"fields"`
	}{m, capped})
	if len(b) > MaxMessage+MaxFieldsBytes+64 {
		t.Errorf("a hostile record is %d bytes as JSON, bound %d", len(b), MaxRecordBytes)
	}
}
