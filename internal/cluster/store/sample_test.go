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
