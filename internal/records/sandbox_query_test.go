package records

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/sandbox"
)

// Pages by state and tags follow one another without holes or repeats,
// records created meanwhile come last, and warm pool sandboxes stay
// hidden while they live.
func TestListSandboxPage(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"), testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Now().UTC()
	put := func(i int, st sandbox.State, tags map[string]string) *sandbox.Sandbox {
		sb := &sandbox.Sandbox{ID: ids.NewSandbox(), State: st, CreatedAt: t0.Add(time.Duration(i) * time.Millisecond),
			Spec: sandbox.Spec{Tags: tags}, Dir: "/x"}
		if err := s.PutSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		return sb
	}
	var team []string
	for i := range 7 {
		st := sandbox.Running
		if i%3 == 0 {
			st = sandbox.Terminated
		}
		team = append(team, put(i, st, map[string]string{"team": "a", "i.x/y": "1"}).ID)
	}
	put(10, sandbox.Running, map[string]string{"team": "b"})
	put(11, sandbox.Running, map[string]string{"corral.pool": "1", "team": "a"})
	put(12, sandbox.Terminated, map[string]string{"corral.pool": "1", "team": "a"})

	page := func(f SandboxFilter) []string {
		t.Helper()
		var got []string
		for {
			recs, next, err := s.ListSandboxPage(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) > f.Limit {
				t.Fatalf("page of %d, limit %d", len(recs), f.Limit)
			}
			for _, r := range recs {
				got = append(got, r.ID)
			}
			if next.ID == "" {
				return got
			}
			f.After, err = ParseCursor("next", next.String())
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	all := page(SandboxFilter{Tags: map[string]string{"team": "a"}, HideLiveTag: "corral.pool", Limit: 3})
	if len(all) != 8 || all[0] != team[0] || all[6] != team[6] {
		t.Fatalf("team a: %v", all)
	}
	running := page(SandboxFilter{States: []sandbox.State{sandbox.Running}, Tags: map[string]string{"team": "a", "i.x/y": ""}, HideLiveTag: "corral.pool", Limit: 2})
	if want := []string{team[1], team[2], team[4], team[5]}; len(running) != 4 || running[0] != want[0] || running[3] != want[3] {
		t.Fatalf("running team a: %v, want %v", running, want)
	}
	// A cursor survives records created after it was handed out.
	recs, next, err := s.ListSandboxPage(ctx, SandboxFilter{Limit: 5})
	if err != nil || len(recs) != 5 || next.ID != recs[4].ID {
		t.Fatalf("first page: %d, %v, %v", len(recs), next, err)
	}
	late := put(20, sandbox.Running, nil)
	rest, _, err := s.ListSandboxPage(ctx, SandboxFilter{After: next, Limit: 100})
	if err != nil || len(rest) != 6 || rest[5].ID != late.ID {
		t.Fatalf("rest: %d, %v", len(rest), err)
	}
	for _, tok := range []string{"x", "!!!", "MTIz", string(make([]byte, 200))} {
		if _, err := ParseCursor("next", tok); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("cursor %q: %v", tok, err)
		}
	}
	if _, _, err := s.ListSandboxPage(ctx, SandboxFilter{Tags: map[string]string{`a"b`: "1"}, Limit: 1}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a quote in a tag key: %v", err)
	}
}

// A name finds the newest record of that name; a lifetime set while
// running is kept.
func TestSandboxByNameAndLifetime(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "n.db"), testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Now().UTC()
	old := &sandbox.Sandbox{ID: ids.NewSandbox(), State: sandbox.Terminated, CreatedAt: t0, Spec: sandbox.Spec{Name: "web"}, Dir: "/x"}
	cur := &sandbox.Sandbox{ID: ids.NewSandbox(), State: sandbox.Running, CreatedAt: t0.Add(time.Second), Spec: sandbox.Spec{Name: "web"},
		Dir: "/x", Lifetime: 42 * time.Minute}
	for _, sb := range []*sandbox.Sandbox{old, cur} {
		if err := s.PutSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := s.SandboxIDByName(ctx, "web"); err != nil || id != cur.ID {
		t.Fatalf("by name: %s, %v", id, err)
	}
	if _, err := s.SandboxIDByName(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown name: %v", err)
	}
	got, err := s.GetSandbox(ctx, cur.ID)
	if err != nil || got.Lifetime != 42*time.Minute {
		t.Fatalf("lifetime: %+v, %v", got, err)
	}
}
