package manager

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/netpolicy/policy"
	"corral/internal/sandbox"
)

// TestDecisionLogFolds: past the burst, decisions are folded, counted by
// destination; detailed plus folded is everything sent; the bucket
// refills at the rate; a window's report says how many and where.
func TestDecisionLogFolds(t *testing.T) {
	l := newDecisionLog()
	t0 := time.Unix(1_800_000_000, 0)
	dec := func(i int) policy.Decision {
		return policy.Decision{SandboxID: "sb-a", Proto: "tcp", Dst: netip.AddrFrom4([4]byte{10, 0, 0, byte(i % 40)}), Port: 80, Reason: "private range"}
	}
	detailed := 0
	const sent = 5000
	for i := 0; i < sent; i++ {
		if l.admit(dec(i), t0) {
			detailed++
		}
	}
	if detailed != DecisionBurst {
		t.Fatalf("%d detailed of a burst, want %d", detailed, DecisionBurst)
	}
	// Another sandbox has its own budget.
	if !l.admit(policy.Decision{SandboxID: "sb-b", Proto: "udp"}, t0) {
		t.Fatal("a quiet sandbox's first decision was folded")
	}
	if got := l.due(t0.Add(DecisionWindow - time.Millisecond)); len(got) != 0 {
		t.Fatalf("a report before the window ended: %+v", got)
	}
	reps := l.due(t0.Add(DecisionWindow))
	if len(reps) != 1 || reps[0].sandbox != "sb-a" {
		t.Fatalf("reports %+v", reps)
	}
	r := reps[0]
	total := r.other["denied tcp"]
	for _, n := range r.counts {
		total += n
	}
	if r.folded != sent-DecisionBurst || total != r.folded || len(r.counts) != DecisionKeys || r.other["denied tcp"] == 0 {
		t.Fatalf("folded %d (want %d), counted %d, %d keys, other %d", r.folded, sent-DecisionBurst, total, len(r.counts), r.other["denied tcp"])
	}
	msg, f := r.event()
	if f["folded"] != fmt.Sprint(sent-DecisionBurst) || !strings.Contains(msg, "denied tcp 10.0.0.") || !strings.Contains(msg, "denied tcp other destinations ×") {
		t.Errorf("event %q %v", msg, f)
	}
	if len(msg) > 4096 {
		t.Errorf("a fold's message is %d bytes", len(msg))
	}
	// Ten seconds on: DecisionRate*10 tokens, no more.
	later, n := t0.Add(DecisionWindow+10*time.Second), 0
	for i := 0; i < 100; i++ {
		if l.admit(dec(i), later) {
			n++
		}
	}
	if n != DecisionRate*20 {
		t.Errorf("%d detailed after 20 s, want %d", n, DecisionRate*20)
	}
}

func TestFoldDomain(t *testing.T) {
	for in, want := range map[string]string{"a.b.flood.test": "*.flood.test", "flood.test": "flood.test", "x": "x", "a.example.com.": "*.example.com"} {
		if got := foldDomain(in); got != want {
			t.Errorf("foldDomain(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDecisionLogForgets: a quiet sandbox's bucket goes.
func TestDecisionLogForgets(t *testing.T) {
	l := newDecisionLog()
	t0 := time.Unix(1_800_000_000, 0)
	l.admit(policy.Decision{SandboxID: "sb-a"}, t0)
	l.due(t0.Add(time.Hour))
	if len(l.buckets) != 0 {
		t.Fatalf("buckets %v", l.buckets)
	}
}

// A daemon that stops writes what it had counted: the queued decisions
// and the folds of a window not yet ended.
func TestDecisionsFlushedAtClose(t *testing.T) {
	e := newEnv(t)
	id := e.create(sandbox.Spec{}).ID
	const sent = DecisionBurst + 60
	for i := 0; i < sent; i++ {
		e.m.RecordDecision(policy.Decision{SandboxID: id, Allowed: true, Proto: "dns", Via: "dns", Domain: fmt.Sprintf("n%d.flood.test", i)})
	}
	e.m.Close()
	evs, err := e.store.Events(context.Background(), id, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	detailed, folded := 0, 0
	for _, ev := range evs {
		switch ev.Kind {
		case "egress_allowed":
			detailed++
		case "limit_reached":
			n, _ := strconv.Atoi(ev.Fields["folded"])
			folded += n
		}
	}
	if detailed+folded != sent || folded == 0 {
		t.Errorf("after close: %d detailed and %d folded of %d decisions", detailed, folded, sent)
	}
}
