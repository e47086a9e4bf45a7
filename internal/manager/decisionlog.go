package manager

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"corral/internal/netpolicy/policy"
)

// The decision log's bound. Every network decision of a sandbox (a DNS
// answer, an egress proxy verdict, a kernel refusal) is an event and an
// audit entry of about 1 KB; a sandbox that floods would otherwise grow
// the daemon's database without bound and could bury a real connection in
// junk. So each sandbox has a token bucket of detailed decisions
// (DecisionBurst, refilled at DecisionRate a second); a decision past it
// is folded: counted, in its window of DecisionWindow, under its verdict,
// protocol, destination and reason (at most DecisionKeys of them; the rest
// under "other"), and each window with folds ends with one limit_reached
// event saying how many were folded and where they went. Nothing is
// dropped: a decision is either in the log or counted in a fold. Worst
// case per sandbox and minute: DecisionBurst once, then DecisionRate*60
// detailed events and 60/DecisionWindow folds (each at most ≈2 KB).
const (
	DecisionBurst  = 200
	DecisionRate   = 2
	DecisionWindow = 10 * time.Second
	DecisionKeys   = 16
	// maxFoldDest bounds a destination's text in a fold.
	maxFoldDest = 96
)

// foldKey is what folded decisions are counted under.
type foldKey struct{ verdict, proto, dest, reason string }

// decisionBucket is one sandbox's budget and current window.
type decisionBucket struct {
	tokens  float64
	last    time.Time
	start   time.Time // of the window with folds; zero: none
	folded  int
	counts  map[foldKey]int
	other   map[string]int // by protocol, past DecisionKeys
	lastDec time.Time
}

// decisionLog holds every sandbox's bucket.
type decisionLog struct {
	mu      sync.Mutex
	buckets map[string]*decisionBucket
}

func newDecisionLog() *decisionLog { return &decisionLog{buckets: map[string]*decisionBucket{}} }

// admit says whether d goes to the log in detail; when not, it is folded.
func (l *decisionLog) admit(d policy.Decision, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[d.SandboxID]
	if b == nil {
		b = &decisionBucket{tokens: DecisionBurst, last: now}
		l.buckets[d.SandboxID] = b
	}
	b.tokens = min(DecisionBurst, b.tokens+now.Sub(b.last).Seconds()*DecisionRate)
	b.last, b.lastDec = now, now
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	b.fold(d, now)
	return false
}

// fold counts d without detail (its bucket is empty, or the event queue
// is full).
func (l *decisionLog) fold(d policy.Decision, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[d.SandboxID]
	if b == nil {
		b = &decisionBucket{last: now}
		l.buckets[d.SandboxID] = b
	}
	b.fold(d, now)
}

func (b *decisionBucket) fold(d policy.Decision, now time.Time) {
	if b.start.IsZero() {
		b.start, b.counts, b.other = now, map[foldKey]int{}, map[string]int{}
	}
	b.folded++
	k := keyOf(d)
	if _, ok := b.counts[k]; ok || len(b.counts) < DecisionKeys {
		b.counts[k]++
		return
	}
	b.other[k.verdict+" "+k.proto]++
}

// foldDomain is a DNS name as folds count it: its last two labels, so a
// flood of made-up subdomains is one destination.
func foldDomain(name string) string {
	labels := strings.Split(strings.TrimSuffix(name, "."), ".")
	if len(labels) <= 2 {
		return name
	}
	return "*." + strings.Join(labels[len(labels)-2:], ".")
}

func keyOf(d policy.Decision) foldKey {
	verdict := "denied"
	if d.Allowed {
		verdict = "allowed"
	}
	var dest []string
	if d.Dst.IsValid() {
		dest = append(dest, netip.AddrPortFrom(d.Dst, d.Port).String())
	}
	if d.Domain != "" {
		dest = append(dest, foldDomain(d.Domain))
	}
	s := strings.Join(dest, " ")
	if len(s) > maxFoldDest {
		s = s[:maxFoldDest] + "…"
	}
	reason := d.Reason
	if d.Rcode != "" {
		reason = d.Rcode
	}
	if len(reason) > maxFoldDest {
		reason = reason[:maxFoldDest] + "…"
	}
	return foldKey{verdict: verdict, proto: d.Proto, dest: s, reason: reason}
}

// foldReport is one ended window's folds for one sandbox.
type foldReport struct {
	sandbox string
	start   time.Time
	window  time.Duration
	folded  int
	counts  map[foldKey]int
	other   map[string]int
}

// due takes the reports of the windows that have ended by now, and
// forgets the buckets of sandboxes quiet long enough to have refilled.
func (l *decisionLog) due(now time.Time) []foldReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []foldReport
	for id, b := range l.buckets {
		if !b.start.IsZero() && now.Sub(b.start) >= DecisionWindow {
			out = append(out, foldReport{sandbox: id, start: b.start, window: now.Sub(b.start), folded: b.folded, counts: b.counts, other: b.other})
			b.start, b.folded, b.counts, b.other = time.Time{}, 0, nil, nil
		}
		if b.start.IsZero() && now.Sub(b.lastDec) > time.Duration(DecisionBurst/DecisionRate)*time.Second {
			delete(l.buckets, id)
		}
	}
	return out
}

// event is the report's limit_reached event: its message and fields.
func (r foldReport) event() (string, map[string]string) {
	type kc struct {
		k foldKey
		n int
	}
	var all []kc
	for k, n := range r.counts {
		all = append(all, kc{k, n})
	}
	slices.SortFunc(all, func(a, b kc) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(fmt.Sprint(a.k), fmt.Sprint(b.k))
	})
	var parts []string
	for _, e := range all {
		p := fmt.Sprintf("%s %s %s ×%d", e.k.verdict, e.k.proto, e.k.dest, e.n)
		if e.k.reason != "" {
			p = fmt.Sprintf("%s %s %s (%s) ×%d", e.k.verdict, e.k.proto, e.k.dest, e.k.reason, e.n)
		}
		parts = append(parts, p)
	}
	others := slices.Sorted(maps.Keys(r.other))
	for _, k := range others {
		parts = append(parts, fmt.Sprintf("%s other destinations ×%d", k, r.other[k]))
	}
	secs := int(r.window.Round(time.Second) / time.Second)
	msg := fmt.Sprintf("network decisions past %d a second (burst %d) folded: %d in %d s: %s",
		DecisionRate, DecisionBurst, r.folded, secs, strings.Join(parts, "; "))
	return msg, map[string]string{
		"resource": "network_decisions", "limit": "per_sandbox", "max": strconv.Itoa(DecisionRate),
		"folded": strconv.Itoa(r.folded), "since": r.start.UTC().Format(time.RFC3339Nano),
		"seconds": strconv.Itoa(secs), "destinations": strings.Join(parts, "; "),
	}
}
