package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"corral/internal/cluster/pgtest"
	"corral/internal/errdefs"
)

// A snapshot's locations: found by id and by name, listed once however
// many nodes hold it, one node's copy forgotten alone, then all of them.
func TestSnapshotLocations(t *testing.T) {
	s := open(t, pgtest.Start(t))
	ctx := context.Background()
	for _, id := range []string{"n1", "n2"} {
		if err := s.Register(ctx, testNode(id, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	rec := json.RawMessage(`{"id":"snap-a","name":"base"}`)
	a := SnapshotLocation{ID: "snap-a", Name: "base", Node: "n1", Runtime: "gvisor", RuntimeVersion: "v1", SizeBytes: 42, Record: rec}
	for _, l := range []SnapshotLocation{a, a, {ID: "snap-b", Node: "n2", Runtime: "gvisor", RuntimeVersion: "v1"}} {
		if err := s.AddSnapshot(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	b := a
	b.Node = "n2"
	if err := s.AddSnapshot(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSnapshot(ctx, SnapshotLocation{ID: "snap-c", Node: "nope", Runtime: "gvisor"}); err == nil {
		t.Fatal("a location on an unknown node was recorded")
	}
	for _, ref := range []string{"snap-a", "base"} {
		ls, err := s.SnapshotLocations(ctx, ref)
		if err != nil || len(ls) != 2 || ls[0].Node != "n1" || ls[1].Node != "n2" {
			t.Fatalf("locations of %s: %+v, %v; want n1 then n2", ref, ls, err)
		}
		if l := ls[0]; l.ID != "snap-a" || l.Name != "base" || l.RuntimeVersion != "v1" || l.SizeBytes != 42 {
			t.Fatalf("location of %s: %+v", ref, l)
		}
		var got map[string]string
		if err := json.Unmarshal(ls[0].Record, &got); err != nil || got["name"] != "base" {
			t.Fatalf("record of %s: %s, %v", ref, ls[0].Record, err)
		}
	}
	if _, err := s.SnapshotLocations(ctx, "snap-zz"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("an unknown snapshot: %v, want not found", err)
	}
	all, err := s.Snapshots(ctx)
	if err != nil || len(all) != 2 || all[0].ID != "snap-a" || all[1].ID != "snap-b" {
		t.Fatalf("Snapshots: %+v, %v; want snap-a and snap-b once each", all, err)
	}
	if err := s.RemoveSnapshotLocation(ctx, "snap-a", "n1"); err != nil {
		t.Fatal(err)
	}
	if ls, err := s.SnapshotLocations(ctx, "base"); err != nil || len(ls) != 1 || ls[0].Node != "n2" {
		t.Fatalf("after forgetting n1's copy: %+v, %v; want n2's only", ls, err)
	}
	if err := s.RemoveSnapshot(ctx, "snap-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SnapshotLocations(ctx, "snap-a"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a removed snapshot: %v, want not found", err)
	}
}

// A restore asks for its runtime's version: only a node that registered
// that version takes it, and a refusal names the version.
func TestReserveByRuntimeVersion(t *testing.T) {
	s := open(t, pgtest.Start(t))
	ctx := context.Background()
	for id, v := range map[string]string{"old": "v1", "new": "v2", "silent": ""} {
		n := testNode(id, 4096)
		if v != "" {
			n.RuntimeVersions = map[string]string{"gvisor": v}
		}
		if err := s.Register(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Node(ctx, "new"); err != nil || got.RuntimeVersions["gvisor"] != "v2" {
		t.Fatalf("node new: %+v, %v", got, err)
	}
	for range 10 {
		p, err := s.Reserve(ctx, Request{Runtime: "gvisor", RuntimeVersion: "v2", CPUMilli: 100, MemoryMB: 64, FreshWithin: time.Minute})
		if err != nil || p.Node.ID != "new" {
			t.Fatalf("a v2 restore: %+v, %v; want node new", p.Node.ID, err)
		}
	}
	_, err := s.Reserve(ctx, Request{Runtime: "gvisor", RuntimeVersion: "v3", CPUMilli: 100, MemoryMB: 64, FreshWithin: time.Minute})
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), `"v3"`) {
		t.Fatalf("a v3 restore: %v; want resource_exhausted naming v3", err)
	}
}

// A restore goes to a node that holds its snapshot while one has room,
// and elsewhere once none does.
func TestRestorePrefersHolders(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	s := open(t, url)
	for _, id := range []string{"n1", "n2", "n3"} {
		if err := s.Register(ctx, testNode(id, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddSnapshot(ctx, SnapshotLocation{ID: "snap-h", Node: "n2", Runtime: "gvisor", RuntimeVersion: "v1", Record: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	place := func() string {
		t.Helper()
		p, err := s.Reserve(ctx, Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 64, FreshWithin: time.Minute, Snapshot: "snap-h"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		return p.Node.ID
	}
	for range 10 {
		if got := place(); got != "n2" {
			t.Fatalf("a restore went to %s, not n2 which holds its snapshot", got)
		}
	}
	if _, err := s.pool.Exec(ctx, `UPDATE nodes SET used_memory_mb = memory_mb WHERE id = 'n2'`); err != nil {
		t.Fatal(err)
	}
	if got := place(); got == "n2" {
		t.Fatal("a restore went to its snapshot's full holder")
	}
}
