package records

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/usage"
)

// TestUsage: usage records round-trip, a window finds the sandboxes that
// ran in it, and pruning takes those that ended before the cutoff.
func TestUsage(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "corral.db"), testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(id string, start, end time.Duration) {
		r := usage.Record{SandboxID: id, Runtime: "gvisor", Tags: map[string]string{"team": id},
			StartedAt: t0.Add(start), EndedAt: t0.Add(end), Totals: usage.Totals{CPUSeconds: 1.5, NetInBytes: 7}}
		if err := s.PutUsage(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	put("sb-a", 0, time.Hour)
	put("sb-b", 2*time.Hour, 3*time.Hour)
	put("sb-b", 2*time.Hour, 4*time.Hour) // settled again: replaces
	got, err := s.GetUsage(ctx, "sb-b")
	if err != nil || got.Tags["team"] != "sb-b" || got.Totals.CPUSeconds != 1.5 || got.Totals.NetInBytes != 7 || !got.EndedAt.Equal(t0.Add(4*time.Hour)) {
		t.Fatalf("GetUsage = %+v, %v", got, err)
	}
	if _, err := s.GetUsage(ctx, "sb-none"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("GetUsage of nothing: %v", err)
	}
	for _, tc := range []struct {
		from, to time.Duration
		want     int
	}{{0, 0, 2}, {90 * time.Minute, 0, 1}, {0, 90 * time.Minute, 1}, {70 * time.Minute, 110 * time.Minute, 0}} {
		var to time.Time
		if tc.to > 0 {
			to = t0.Add(tc.to)
		}
		rs, err := s.ListUsage(ctx, t0.Add(tc.from), to, 100)
		if err != nil || len(rs) != tc.want {
			t.Errorf("ListUsage(%v, %v) = %d records, %v; want %d", tc.from, tc.to, len(rs), err, tc.want)
		}
	}
	if n, err := s.PruneUsage(ctx, t0.Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("PruneUsage = %d, %v", n, err)
	}
	if _, err := s.GetUsage(ctx, "sb-a"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("sb-a not pruned: %v", err)
	}
}
