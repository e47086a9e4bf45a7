package records

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/sandbox"
)

// TestPruneEnded: the records and events of sandboxes that ended before
// the cutoff go, oldest first and at most limit at a time; a sandbox that
// has not ended stays however old it is, and so do its events.
func TestPruneEnded(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "corral.db"), testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	spec := sandbox.Spec{Runtime: "gvisor", Image: "base"}
	put := func(state sandbox.State, created, ended time.Time) string {
		sb := &sandbox.Sandbox{ID: ids.NewSandbox(), Spec: spec, State: state, CreatedAt: created, EndedAt: ended}
		if err := s.PutSandbox(ctx, sb, Event{Kind: string(state), Message: "m"}); err != nil {
			t.Fatal(err)
		}
		return sb.ID
	}
	old, older := now.Add(-48*time.Hour), now.Add(-72*time.Hour)
	live := put(sandbox.Running, older, time.Time{})
	paused := put(sandbox.Paused, older, time.Time{})
	oldTerm := put(sandbox.Terminated, older, old)
	olderFail := put(sandbox.Failed, older, older)
	noEnd := put(sandbox.Terminated, older, time.Time{}) // an older daemon's record
	recent := put(sandbox.Terminated, older, now.Add(-time.Hour))
	if err := s.AppendEvent(ctx, Event{SandboxID: "sb-gone0000000000000", Kind: "k", Message: "m", Time: older}); err != nil {
		t.Fatal(err)
	}

	cutoff := now.Add(-24 * time.Hour)
	first, err := s.PruneEnded(ctx, cutoff, 2)
	if err != nil {
		t.Fatal(err)
	}
	rest, err := s.PruneEnded(ctx, cutoff, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || !slices.Contains(first, olderFail) {
		t.Errorf("first batch %v: want 2, the oldest end first", first)
	}
	pruned := append(first, rest...)
	slices.Sort(pruned)
	want := []string{oldTerm, olderFail, noEnd}
	slices.Sort(want)
	if !slices.Equal(pruned, want) {
		t.Errorf("pruned %v, want %v", pruned, want)
	}
	for _, id := range want {
		if _, err := s.GetSandbox(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s: record still there (%v)", id, err)
		}
		if evs, _ := s.Events(ctx, id, 0, 10); len(evs) != 0 {
			t.Errorf("%s: events still there: %v", id, evs)
		}
	}
	for _, id := range []string{live, paused, recent} {
		if _, err := s.GetSandbox(ctx, id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		if evs, _ := s.Events(ctx, id, 0, 10); len(evs) != 1 {
			t.Errorf("%s: events %v", id, evs)
		}
	}
	if n, err := s.PruneOrphanEvents(ctx, cutoff); err != nil || n != 1 {
		t.Errorf("orphan events pruned: %d, %v; want 1", n, err)
	}
	if again, err := s.PruneEnded(ctx, cutoff, 100); err != nil || len(again) != 0 {
		t.Errorf("second prune: %v, %v; want nothing", again, err)
	}
}
