package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"corral/internal/cluster/pgtest"
	"corral/internal/errdefs"
)

// A drain's record: a scan records what moves and what stays, two
// instances never claim the same move, a silent mover's move is claimed
// again, ends are reported, sandboxes gone from the node are dropped, and
// a new drain forgets the last one's failures.
func TestDrainMoves(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t)
	a, b := open(t, url), open(t, url)
	if err := a.Register(ctx, testNode("n1", 4096)); err != nil {
		t.Fatal(err)
	}
	if err := a.StartDrain(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	ds, err := a.Drains(ctx)
	if err != nil || ds["n1"].Scanned || len(ds["n1"].Moves) != 0 {
		t.Fatalf("a drain just begun: %+v, %v; want unscanned, empty", ds, err)
	}
	found := []Found{{Sandbox: "p1"}, {Sandbox: "p2"}, {Sandbox: "p3"}, {Sandbox: "r1", Stuck: "running"}}
	if err := a.ScanDrain(ctx, "n1", found); err != nil {
		t.Fatal(err)
	}
	// Two instances claim at once: three moves between them, none twice.
	ca, err := a.ClaimMoves(ctx, "n1", 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.ClaimMoves(ctx, "n1", 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range append(ca, cb...) {
		if seen[m.Sandbox] || m.Sandbox == "r1" {
			t.Fatalf("claimed %s twice, or a stuck one: %+v %+v", m.Sandbox, ca, cb)
		}
		seen[m.Sandbox] = true
	}
	if len(seen) != 3 {
		t.Fatalf("claimed %v; want p1, p2, p3", seen)
	}
	// A rescan while they move changes none of them.
	if err := a.ScanDrain(ctx, "n1", found); err != nil {
		t.Fatal(err)
	}
	if more, err := a.ClaimMoves(ctx, "n1", 5, time.Minute); err != nil || len(more) != 0 {
		t.Fatalf("claimed again while moving: %+v, %v", more, err)
	}
	// A mover that goes silent: its move is claimed again, with its
	// progress.
	m1 := ca[0]
	m1.Target, m1.Snapshot = "n2", "snap-x"
	if err := a.MoveProgress(ctx, m1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(ctx, `UPDATE drain_moves SET updated_at = now() - interval '2 minutes' WHERE sandbox_id = $1`, m1.Sandbox); err != nil {
		t.Fatal(err)
	}
	again, err := b.ClaimMoves(ctx, "n1", 5, time.Minute)
	if err != nil || len(again) != 1 || again[0].Sandbox != m1.Sandbox || again[0].Target != "n2" || again[0].Snapshot != "snap-x" {
		t.Fatalf("a silent mover's move claimed again: %+v, %v", again, err)
	}
	all := append(ca, cb...)
	m1.Target = "n2"
	if err := b.MoveDone(ctx, m1, MoveMoved, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.MoveDone(ctx, all[1], MoveFailed, "no room"); err != nil {
		t.Fatal(err)
	}
	// all[2] ended on its node meanwhile: a failed move, then gone from
	// the scan; r1 was paused by its user.
	if err := a.MoveDone(ctx, all[2], MovePending, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.ScanDrain(ctx, "n1", []Found{{Sandbox: all[1].Sandbox}, {Sandbox: "r1"}}); err != nil {
		t.Fatal(err)
	}
	ds, err = a.Drains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range ds["n1"].Moves {
		got[m.Sandbox] = m.State + "/" + m.Reason + "/" + m.Target
	}
	want := map[string]string{m1.Sandbox: "moved//n2", all[1].Sandbox: "failed/no room/", "r1": "pending//"}
	if !ds["n1"].Scanned || len(got) != len(want) {
		t.Fatalf("the drain: %v (scanned %v); want %v", got, ds["n1"].Scanned, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("the drain: %v; want %v", got, want)
		}
	}
	// A new drain tries the failed one again and forgets the moved.
	if err := a.StartDrain(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if ds, _ = a.Drains(ctx); ds["n1"].Scanned || len(ds["n1"].Moves) != 0 {
		t.Fatalf("a new drain kept %+v", ds["n1"])
	}
	if err := a.StopDrain(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if ds, _ = a.Drains(ctx); len(ds) != 0 {
		t.Fatalf("an undrain kept %+v", ds)
	}
}

// Move turns a placement to the reservation's node: the counters follow
// (checkCounters), the sandbox is found there, and a second move of it
// from its old node is refused.
func TestMovePlacement(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.Start(t))
	for _, id := range []string{"n1", "n2"} {
		if err := s.Register(ctx, testNode(id, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	req := Request{Runtime: "gvisor", CPUMilli: 1000, MemoryMB: 1024, DiskMB: 10, FreshWithin: time.Minute, Exclude: []string{"n2"}}
	p, err := s.Reserve(ctx, req)
	if err != nil || p.Node.ID != "n1" {
		t.Fatalf("reserve on n1: %+v, %v", p, err)
	}
	if err := s.Bind(ctx, p.ID, "sb-1", "web"); err != nil {
		t.Fatal(err)
	}
	req.Exclude = []string{"n1"}
	rsv, err := s.Reserve(ctx, req)
	if err != nil || rsv.Node.ID != "n2" {
		t.Fatalf("reserve on n2: %+v, %v", rsv, err)
	}
	if err := s.Move(ctx, "sb-1", "n1", rsv.ID); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s)
	got, err := s.Lookup(ctx, "web")
	if err != nil || got.ID != "sb-1" || got.Node.ID != "n2" || got.State != Placed {
		t.Fatalf("after the move: %+v, %v; want sb-1 placed on n2 by its name", got, err)
	}
	uses, _ := s.Uses(ctx)
	if uses["n1"].Sandboxes != 0 || uses["n2"].Sandboxes != 1 || uses["n2"].MemoryMB != 1024 {
		t.Fatalf("counters after the move: %+v", uses)
	}
	rsv2, err := s.Reserve(ctx, Request{Runtime: "gvisor", CPUMilli: 1000, MemoryMB: 1024, FreshWithin: time.Minute, Exclude: []string{"n2"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Move(ctx, "sb-1", "n1", rsv2.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("a move from a node it left: %v; want failed_precondition", err)
	}
	if err := s.Release(ctx, rsv2.ID); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s)
}
