package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"corral/internal/cluster/pgtest"
	"corral/internal/usage"
)

// trailOf is n entries of a node's trail from seq first, a sandbox's
// every third; nil fields on the first (the node hashes those as null).
func trailOf(first, n int64) []AuditEntry {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 123456789, time.UTC)
	var es []AuditEntry
	for seq := first; seq < first+n; seq++ {
		e := AuditEntry{Seq: seq, Time: t0.Add(time.Duration(seq) * time.Second), Kind: "api", Caller: "token:abc",
			Fields: map[string]string{"path": fmt.Sprintf("/v1/x/%d", seq)}, PrevHash: fmt.Sprintf("h%d", seq-1), Hash: fmt.Sprintf("h%d", seq)}
		if seq%3 == 0 {
			e.Kind, e.SandboxID = "exec", "sb-1"
		}
		if seq == 1 {
			e.Fields = nil
		}
		es = append(es, e)
	}
	return es
}

// Shipping is idempotent (a repeat, and an overlap after a restart, add
// nothing and change nothing), entries come back exactly as shipped,
// pages continue after their last position whatever the filter, and a
// shipment still running holds back later ones until it ends.
func TestShipAndPageAudit(t *testing.T) {
	s := open(t, pgtest.Start(t))
	// A shipment waiting on a lock fails the test rather than hang it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range []string{"n1", "n2"} {
		if err := s.Register(ctx, testNode(id, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	// A control plane leads meanwhile, as in a cluster: shipping must
	// not wait on its lock.
	l, err := s.Lead(ctx)
	if err != nil || l == nil {
		t.Fatalf("leading: %v %v", l, err)
	}
	defer l.Resign(ctx)
	if seq, hash, err := s.AuditHead(ctx, "n1"); err != nil || seq != 0 || hash != "" {
		t.Fatalf("head of nothing shipped: %d %q %v", seq, hash, err)
	}
	n1 := trailOf(1, 7)
	for _, batch := range [][]AuditEntry{n1[:4], n1[:4], n1[2:]} {
		if err := s.ShipAudit(ctx, "n1", batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ShipAudit(ctx, "n2", trailOf(1, 2)); err != nil {
		t.Fatal(err)
	}
	forged := trailOf(3, 1)
	forged[0].Caller = "forged"
	if err := s.ShipAudit(ctx, "n1", forged); err != nil {
		t.Fatal(err)
	}
	if seq, hash, err := s.AuditHead(ctx, "n1"); err != nil || seq != 7 || hash != "h7" {
		t.Fatalf("n1's head: %d %q %v; want 7 h7", seq, hash, err)
	}
	var walked []AuditEntry
	if err := s.WalkAudit(ctx, "n1", func(e AuditEntry) error { walked = append(walked, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(walked) != 7 {
		t.Fatalf("walked %d of n1's entries, want 7 (each once)", len(walked))
	}
	for i, e := range walked {
		w := n1[i]
		if e.Node != "n1" || e.Seq != w.Seq || !e.Time.Equal(w.Time) || e.Caller != w.Caller || e.Hash != w.Hash ||
			e.PrevHash != w.PrevHash || fmt.Sprint(e.Fields) != fmt.Sprint(w.Fields) || (e.Fields == nil) != (w.Fields == nil) {
			t.Fatalf("entry %d back as %+v, shipped as %+v", w.Seq, e, w)
		}
	}
	nodes, err := s.AuditNodes(ctx)
	if err != nil || strings.Join(nodes, ",") != "n1,n2" {
		t.Fatalf("AuditNodes: %v %v", nodes, err)
	}

	// Pages of 3 give all 9 entries once, in the order received.
	var got []string
	for f := (AuditFilter{Limit: 3}); ; {
		page, err := s.QueryAudit(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			got = append(got, fmt.Sprintf("%s/%d", e.Node, e.Seq))
			f.After = e.At
		}
		if len(page) < 3 {
			break
		}
	}
	if want := "n1/1 n1/2 n1/3 n1/4 n1/5 n1/6 n1/7 n2/1 n2/2"; strings.Join(got, " ") != want {
		t.Fatalf("paged: %s\nwant:  %s", strings.Join(got, " "), want)
	}
	// A shipment still running holds back the ones after it: a page
	// continued from the last position then misses neither.
	last, err := s.QueryAudit(ctx, AuditFilter{Limit: MaxAuditPage})
	if err != nil || len(last) != 9 {
		t.Fatalf("all entries: %d, %v", len(last), err)
	}
	end := last[8].At
	slow, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx)
	if _, err := slow.Exec(ctx, `INSERT INTO audit_entries (node_id, seq, time_ns, kind, prev_hash, hash) VALUES ('n2', 3, 0, 'api', 'h2', 'h3')`); err != nil {
		t.Fatal(err)
	}
	if err := s.ShipAudit(ctx, "n1", trailOf(8, 2)); err != nil {
		t.Fatal(err)
	}
	if held, err := s.QueryAudit(ctx, AuditFilter{After: end, Limit: 10}); err != nil || len(held) != 0 {
		t.Fatalf("after the last position while an older shipment runs: %+v, %v; want nothing yet", held, err)
	}
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, e := range mustQueryAudit(t, s, AuditFilter{After: end, Limit: 10}) {
		got = append(got, fmt.Sprintf("%s/%d", e.Node, e.Seq))
	}
	if want := "n2/3 n1/8 n1/9"; strings.Join(got, " ") != want {
		t.Fatalf("after the last position once it ended: %s, want %s", strings.Join(got, " "), want)
	}
	sb, err := s.QueryAudit(ctx, AuditFilter{SandboxID: "sb-1", Kinds: []string{"exec"}, Since: n1[4].Time, Limit: 10})
	if err != nil || len(sb) != 2 || sb[0].Seq != 6 || sb[1].Seq != 9 {
		t.Fatalf("sb-1's exec entries since entry 5: %+v %v; want entries 6 and 9", sb, err)
	}
	if err := s.ShipAudit(ctx, "nope", trailOf(1, 1)); err == nil {
		t.Fatal("entries of an unknown node were stored")
	}
}

func mustQueryAudit(t *testing.T, s *Store, f AuditFilter) []AuditEntry {
	t.Helper()
	es, err := s.QueryAudit(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// Usage: running figures, then the settled record replacing them; late
// running figures never replace a settled record; the window selects
// what ran in it.
func TestShipUsage(t *testing.T) {
	s := open(t, pgtest.Start(t))
	ctx := context.Background()
	if err := s.Register(ctx, testNode("n1", 4096)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	live := usage.Record{SandboxID: "sb-a", Runtime: "gvisor", Tags: map[string]string{"team": "x"}, StartedAt: t0, Totals: usage.Totals{CPUSeconds: 1}}
	old := usage.Record{SandboxID: "sb-old", Runtime: "vm", StartedAt: t0.Add(-3 * time.Hour), EndedAt: t0.Add(-2 * time.Hour), Totals: usage.Totals{CPUSeconds: 9}}
	if err := s.ShipUsage(ctx, "n1", []usage.Record{live, old}); err != nil {
		t.Fatal(err)
	}
	if through, err := s.UsageSettledThrough(ctx, "n1"); err != nil || !through.Equal(old.EndedAt) {
		t.Fatalf("settled through %v, %v; want %v", through, err, old.EndedAt)
	}
	settled := live
	settled.EndedAt, settled.Totals = t0.Add(time.Hour), usage.Totals{CPUSeconds: 5}
	late := live
	late.Totals = usage.Totals{CPUSeconds: 2}
	for _, r := range []usage.Record{settled, late} {
		if err := s.ShipUsage(ctx, "n1", []usage.Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := s.ListUsage(ctx, t0.Add(-time.Hour), time.Time{}, 100)
	if err != nil || len(rs) != 1 {
		t.Fatalf("usage in the last window: %+v %v; want sb-a alone", rs, err)
	}
	if r := rs[0]; r.SandboxID != "sb-a" || r.Totals.CPUSeconds != 5 || !r.EndedAt.Equal(settled.EndedAt) || r.Tags["team"] != "x" {
		t.Fatalf("sb-a: %+v; want its settled record", r)
	}
	if rs, err := s.ListUsage(ctx, t0.Add(-4*time.Hour), t0.Add(-time.Hour), 100); err != nil || len(rs) != 1 || rs[0].SandboxID != "sb-old" {
		t.Fatalf("usage in the early window: %+v %v; want sb-old alone", rs, err)
	}
}
