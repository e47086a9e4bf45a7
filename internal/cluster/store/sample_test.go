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

// With one node of 40 having room, the sample of 8 mostly misses it: the
// creates still land there (the fallback to every node), until it is
// full, and then are refused.
func TestSampleFallsBackToEveryNode(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	s := open(t, url)
	for i := range 40 {
		mem := int64(256) // under the request's
		if i == 39 {
			mem = 5 * 512
		}
		if err := s.Register(ctx, testNode(fmt.Sprintf("n%02d", i), mem)); err != nil {
			t.Fatal(err)
		}
	}
	req := Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 512, DiskMB: 100, FreshWithin: time.Minute}
	for i := range 5 {
		p, err := s.Reserve(ctx, req)
		if err != nil || p.Node.ID != "n39" {
			t.Fatalf("create %d: placed on %q, %v; want n39", i, p.Node.ID, err)
		}
	}
	if p, err := s.Reserve(ctx, req); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("a sixth create: placed on %q, %v; want resource exhausted", p.Node.ID, err)
	}
}

// With 2,000 nodes (analyzed, so the draw reads a sample of the table's
// pages), creates spread over many of them: the sample moves.
func TestPageSampleSpreads(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	s := open(t, url)
	for i := range 2000 {
		if err := s.Register(ctx, testNode(fmt.Sprintf("n%04d", i), 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE nodes`); err != nil {
		t.Fatal(err)
	}
	var pct float64
	if err := s.pool.QueryRow(ctx, `SELECT least(100, 100.0 * $1 / greatest(reltuples, 1)) FROM pg_class WHERE oid = 'nodes'::regclass`,
		pageSampleRows).Scan(&pct); err != nil || pct > 20 {
		t.Fatalf("the page sample is %.1f%% of the table (%v); want a part of it", pct, err)
	}
	req := Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 512, DiskMB: 100, FreshWithin: time.Minute}
	drawn := 0
	for range 20 {
		c, err := s.draw(ctx, req, pageSample)
		if err != nil {
			t.Fatal(err)
		}
		if len(c) >= 2 {
			drawn++
		}
	}
	if drawn < 15 {
		t.Fatalf("the page sample gave two candidates or more %d times of 20; want nearly always", drawn)
	}
	seen := map[string]bool{}
	for range 200 {
		p, err := s.Reserve(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		seen[p.Node.ID] = true
	}
	if len(seen) < 100 {
		t.Fatalf("200 creates landed on %d nodes of 2,000; want them spread", len(seen))
	}
}
