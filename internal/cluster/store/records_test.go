package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/internal/cluster/pgtest"
)

// placeRecorded reserves and binds sandbox id on node with the record a
// node would answer (created at created, with tags).
func placeRecorded(t *testing.T, s *Store, node, id string, created time.Time, tags map[string]string) {
	t.Helper()
	ctx := context.Background()
	p, err := s.Reserve(ctx, Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 64, Exclude: otherNodes(node), FreshWithin: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(map[string]any{"id": id, "state": "running", "created_at": created, "tags": tags, "image": "base"})
	if err := s.BindRecord(ctx, p.ID, id, "", rec); err != nil {
		t.Fatal(err)
	}
}

func otherNodes(node string) []string {
	if node == "a" {
		return []string{"b"}
	}
	return []string{"a"}
}

func listIDs(t *testing.T, s *Store, f ListFilter) ([]string, []Listed, Cursor) {
	t.Helper()
	if f.Limit == 0 {
		f.Limit = 100
	}
	ls, next, err := s.ListSandboxes(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range ls {
		ids = append(ids, l.ID)
	}
	return ids, ls, next
}

// A record is written at bind; a heartbeat writes a state only where it
// changed; tag filters use containment and key presence; a lost node's
// sandboxes are listed as lost.
func TestSandboxRecords(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.Start(t))
	a, b := testNode("a", 4096), testNode("b", 4096)
	for _, n := range []Node{a, b} {
		if err := s.Register(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 12, 3, 5, 0, 0, 123456789, time.UTC)
	placeRecorded(t, s, "a", "sb-1", t0, map[string]string{"team": "red", "env": "prod"})
	placeRecorded(t, s, "a", "sb-2", t0.Add(time.Nanosecond), map[string]string{"team": "blue"})
	placeRecorded(t, s, "b", "sb-3", t0.Add(time.Second), nil)

	ids, ls, _ := listIDs(t, s, ListFilter{})
	if fmt.Sprint(ids) != "[sb-1 sb-2 sb-3]" || ls[0].State != "running" || ls[0].CreatedNS != t0.UnixNano() || !strings.Contains(string(ls[0].Record), `"image": "base"`) {
		t.Fatalf("list after bind: %v %+v", ids, ls)
	}

	// A heartbeat with sb-1 paused writes sb-1's row only; the same
	// states again write nothing.
	xmin := func(id string) uint32 {
		var x uint32
		if err := s.pool.QueryRow(ctx, `SELECT xmin::text::bigint FROM placements WHERE id = $1`, id).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before1, before2 := xmin("sb-1"), xmin("sb-2")
	live := []Live{{ID: "sb-1", State: "paused"}, {ID: "sb-2", State: "running"}, {ID: "sb-direct", State: "paused"}}
	if _, err := s.HeartbeatLive(ctx, a, live, time.Hour); err != nil {
		t.Fatal(err)
	}
	if xmin("sb-1") == before1 || xmin("sb-2") != before2 {
		t.Fatal("a heartbeat did not write the changed state, or wrote an unchanged one")
	}
	after1 := xmin("sb-1")
	if _, err := s.HeartbeatLive(ctx, a, live, time.Hour); err != nil {
		t.Fatal(err)
	}
	if xmin("sb-1") != after1 {
		t.Fatal("a heartbeat with the same states wrote the row again")
	}
	if ids, _, _ := listIDs(t, s, ListFilter{States: []string{"paused"}}); fmt.Sprint(ids) != "[sb-1]" {
		t.Fatalf("paused after the heartbeat: %v, want [sb-1]", ids)
	}

	// Tags: a value is containment, a bare key presence; both together.
	for _, c := range []struct {
		tags map[string]string
		want string
	}{
		{map[string]string{"team": "red"}, "[sb-1]"},
		{map[string]string{"team": ""}, "[sb-1 sb-2]"},
		{map[string]string{"team": "", "env": "prod"}, "[sb-1]"},
		{map[string]string{"team": "green"}, "[]"},
	} {
		if ids, _, _ := listIDs(t, s, ListFilter{Tags: c.tags}); fmt.Sprint(ids) != c.want {
			t.Errorf("tags %v: %v, want %s", c.tags, ids, c.want)
		}
	}
	// The tag filter is answered through the GIN index, a list of live
	// states through the live rows' index, among many ended sandboxes.
	if _, err := s.pool.Exec(ctx, `INSERT INTO placements (id, node_id, state, runtime, cpu_milli, memory_mb, disk_mb, tags, created_ns)
		SELECT 'sb-old' || i, 'b', 'ended', 'gvisor', 1, 1, 1, jsonb_build_object('team', 'old' || (i % 50)), i
		FROM generate_series(1, 5000) i; ANALYZE placements`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f       ListFilter
		indexes []string // any of them
	}{
		{ListFilter{Tags: map[string]string{"team": "red", "env": ""}, Limit: 10}, []string{"placements_tags"}},
		// Either index of the live rows only (few live: the planner
		// may sort them).
		{ListFilter{States: []string{"running", "paused"}, Limit: 10}, []string{"placements_listed_live", "placements_node_live"}},
	} {
		plan := explain(t, s, c.f)
		if !slices.ContainsFunc(c.indexes, func(i string) bool { return strings.Contains(plan, " "+i+" ") }) {
			t.Errorf("%+v uses none of %v:\n%s", c.f, c.indexes, plan)
		}
	}

	if _, err := s.pool.Exec(ctx, `DELETE FROM placements WHERE id LIKE 'sb-old%'`); err != nil {
		t.Fatal(err)
	}

	// An update through a control plane replaces the record and tags.
	rec, _ := json.Marshal(map[string]any{"id": "sb-3", "state": "paused", "created_at": t0.Add(time.Second), "tags": map[string]string{"x": "1"}})
	if err := s.SetRecord(ctx, "sb-3", rec); err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := listIDs(t, s, ListFilter{States: []string{"paused"}, Tags: map[string]string{"x": "1"}}); fmt.Sprint(ids) != "[sb-3]" {
		t.Fatalf("after SetRecord: %v, want [sb-3]", ids)
	}

	// a goes silent and is lost: its sandboxes are listed as lost, kept.
	if _, err := s.pool.Exec(ctx, `UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'a'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkLost(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := listIDs(t, s, ListFilter{States: []string{"lost"}}); fmt.Sprint(ids) != "[sb-1 sb-2]" {
		t.Fatalf("lost: %v, want [sb-1 sb-2]", ids)
	}
	// An ended one is terminated.
	if err := s.End(ctx, "sb-3"); err != nil {
		t.Fatal(err)
	}
	if _, ls, _ := listIDs(t, s, ListFilter{}); len(ls) != 3 || ls[2].State != "terminated" {
		t.Fatalf("after sb-3 ended: %+v", ls)
	}
}

// Pages continue from a position: sandboxes placed while a caller pages
// come once, after those listed, and none repeats or is skipped.
func TestListPagingStableUnderInserts(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.Start(t))
	for _, n := range []Node{testNode("a", 1<<20), testNode("b", 1<<20)} {
		if err := s.Register(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour)
	n := 0
	add := func() {
		// Some share a creation time: the id orders them.
		placeRecorded(t, s, []string{"a", "b"}[n%2], fmt.Sprintf("sb-%03d", n), t0.Add(time.Duration(n/2)*time.Millisecond), nil)
		n++
	}
	for range 10 {
		add()
	}
	seen := map[string]int{}
	var order []string
	f := ListFilter{Limit: 3}
	for pages := 0; ; pages++ {
		ids, _, next := listIDs(t, s, f)
		if len(ids) > 3 {
			t.Fatalf("page %d: %d sandboxes", pages, len(ids))
		}
		for _, id := range ids {
			seen[id]++
			order = append(order, id)
		}
		if pages < 3 {
			add() // placed while paging: after every listed one
		}
		if next.ID == "" {
			break
		}
		f.After = next
	}
	if len(seen) != n {
		t.Fatalf("paged %d of %d sandboxes: %v", len(seen), n, order)
	}
	for i, id := range order {
		if seen[id] != 1 || i > 0 && order[i-1] >= id {
			t.Fatalf("paging order %v: repeated or out of order at %s", order, id)
		}
	}
	if _, _, err := s.ListSandboxes(ctx, ListFilter{}); err == nil {
		t.Fatal("a list with no limit was answered")
	}
}

// explain is the plan of f's list query, sequential scans off (the test's
// tables are small enough for one to win otherwise).
func explain(t *testing.T, s *Store, f ListFilter) string {
	t.Helper()
	ctx := context.Background()
	var plan strings.Builder
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return err
		}
		q, args := listQuery(f)
		rows, err := tx.Query(ctx, `EXPLAIN `+q, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan.WriteString(line + "\n")
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return plan.String()
}
