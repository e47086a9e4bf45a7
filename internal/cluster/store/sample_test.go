package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"corral/internal/cluster/pgtest"
	"corral/internal/errdefs"
)

// The candidates are a sample from a random start, not the same few
// nodes: over many placements on 30 nodes with room, most are chosen.
// And with one node of 30 left with room, every placement finds it,
// wherever the random start falls (the sample wraps around).
func TestCandidateSample(t *testing.T) {
	s := open(t, pgtest.Start(t))
	ctx := context.Background()
	const nodes = 30
	for i := range nodes {
		if err := s.Register(ctx, testNode(fmt.Sprintf("n%02d", i), 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	r := Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 256, FreshWithin: time.Minute}
	chosen := map[string]int{}
	for range 300 {
		p, err := s.Reserve(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		chosen[p.Node.ID]++
		if err := s.Release(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
	}
	// A walk from a fixed start would give the same 4 every time, and
	// two choices among them at most 4 nodes.
	if len(chosen) < nodes/2 {
		t.Fatalf("300 placements on %d nodes chose only %d of them: %v", nodes, len(chosen), chosen)
	}
	t.Logf("300 placements chose %d of %d nodes", len(chosen), nodes)

	// Every node but n17 full.
	if _, err := s.pool.Exec(ctx, `UPDATE nodes SET max_sandboxes = 0 WHERE id <> 'n17'`); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		p, err := s.Reserve(ctx, r)
		if err != nil || p.Node.ID != "n17" {
			t.Fatalf("placement %d with only n17 having room: %+v, %v", i, p.Node.ID, err)
		}
		if err := s.Release(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
	}
	checkCounters(t, s)
}

// A heartbeat carries the node's capacity: a node whose bound grew
// takes more at once, one whose bound shrank below what it runs takes
// nothing new (what it runs stays counted).
func TestHeartbeatRefreshesCapacity(t *testing.T) {
	s := open(t, pgtest.Start(t))
	ctx := context.Background()
	n := testNode("a", 1<<20)
	n.MaxSandboxes = 1
	if err := s.Register(ctx, n); err != nil {
		t.Fatal(err)
	}
	r := Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 256, FreshWithin: time.Minute}
	if _, err := s.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, r); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("a second sandbox on a node of 1: %v", err)
	}
	n.MaxSandboxes, n.MemoryMB, n.DiskMB, n.Runtimes, n.KVM = 3, 4096, 777, []string{"gvisor", "vm"}, true
	if _, err := s.Heartbeat(ctx, n, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := s.Node(ctx, "a")
	if err != nil || got.MaxSandboxes != 3 || got.MemoryMB != 4096 || got.DiskMB != 777 || len(got.Runtimes) != 2 || !got.KVM {
		t.Fatalf("after a heartbeat with a new capacity: %+v, %v", got, err)
	}
	for i := range 2 {
		if _, err := s.Reserve(ctx, r); err != nil {
			t.Fatalf("sandbox %d of 3 after the bound grew: %v", i+2, err)
		}
	}
	if _, err := s.Reserve(ctx, r); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("a fourth sandbox on a node of 3: %v", err)
	}
	n.MaxSandboxes = 1
	if _, err := s.Heartbeat(ctx, n, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if uses, _ := s.Uses(ctx); uses["a"].Sandboxes != 3 {
		t.Fatalf("after the bound shrank: %+v, want its 3 reservations still counted", uses["a"])
	}
	if _, err := s.Reserve(ctx, r); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("a sandbox on a node over its shrunk bound: %v", err)
	}
	checkCounters(t, s)
}
