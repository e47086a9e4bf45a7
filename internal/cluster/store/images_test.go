package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"corral/internal/cluster/pgtest"
	"corral/internal/errdefs"
)

const (
	digestA = "sha256:aaaa"
	digestB = "sha256:bbbb"
)

// Nodes report their images; a tag resolves to the holders of the image
// it names, a report replaces the node's list (past the grace), a
// control plane's record survives a stale report, and a wrong credential
// records nothing.
func TestImageLocations(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	s := open(t, url)
	for _, id := range []string{"n1", "n2"} {
		if err := s.Register(ctx, testNode(id, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReportImages(ctx, "n1", "h-n1", []NodeImage{{Digest: digestA, Tags: []string{"app:latest"}, Size: 10}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.ReportImages(ctx, "n2", "wrong", []NodeImage{{Digest: digestA}}, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("report with a wrong credential: %v", err)
	}
	hs, err := s.ImageHolders(ctx, "app:latest")
	if err != nil || len(hs) != 1 || hs[0].Node != "n1" || hs[0].Digest != digestA || hs[0].Size != 10 {
		t.Fatalf("holders of app:latest: %+v, %v", hs, err)
	}
	if _, err := s.ImageHolders(ctx, digestB); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("holders of an unknown digest: %v", err)
	}
	// n2 gets the same image (a fetch) and a control plane records it.
	if err := s.RecordImage(ctx, NodeImage{Node: "n2", Digest: digestA, Tags: []string{"app:latest"}}); err != nil {
		t.Fatal(err)
	}
	// A report of n2 taken before the fetch leaves the fresh row alone.
	if err := s.ReportImages(ctx, "n2", "h-n2", nil, nil); err != nil {
		t.Fatal(err)
	}
	hs, err = s.ImageHolders(ctx, digestA)
	if err != nil || len(hs) != 2 {
		t.Fatalf("holders of %s: %+v, %v", digestA, hs, err)
	}
	// Once past the grace, a report that lists nothing drops it.
	if _, err := s.pool.Exec(ctx, `UPDATE node_images SET updated_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if err := s.ReportImages(ctx, "n2", "h-n2", nil, nil); err != nil {
		t.Fatal(err)
	}
	hs, err = s.ImageHolders(ctx, digestA)
	if err != nil || len(hs) != 1 || hs[0].Node != "n1" {
		t.Fatalf("holders after n2 dropped it: %+v, %v", hs, err)
	}
	// A lost node holds nothing the cluster can fetch.
	if _, err := s.pool.Exec(ctx, `UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'n1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkLost(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ImageHolders(ctx, digestA); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("holders on a lost node: %v", err)
	}
	all, err := s.Images(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("images: %+v, %v", all, err)
	}
	if err := s.ForgetImage(ctx, "n1", digestA); err != nil {
		t.Fatal(err)
	}
	if all, _ := s.Images(ctx); len(all) != 0 {
		t.Fatalf("images after forgetting: %+v", all)
	}
}

// Placement prefers, among nodes with room, one with a warm sandbox
// ready for the create, then one holding its image; a node without room
// gets no bonus, and with no image named the choice stays spread.
func TestPlacementBonus(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	s := open(t, url)
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		if err := s.Register(ctx, testNode(id, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReportImages(ctx, "n2", "h-n2", []NodeImage{{Digest: digestA, Tags: []string{"app:latest"}}}, nil); err != nil {
		t.Fatal(err)
	}
	warm := map[string]int{WarmKey("gvisor", "base"): 1}
	if err := s.ReportImages(ctx, "n3", "h-n3", nil, warm); err != nil {
		t.Fatal(err)
	}
	place := func(r Request) string {
		t.Helper()
		r.Runtime, r.CPUMilli, r.MemoryMB, r.FreshWithin = "gvisor", 100, 64, time.Minute
		p, err := s.Reserve(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		return p.Node.ID
	}
	for range 10 {
		if got := place(Request{Image: "app:latest"}); got != "n2" {
			t.Fatalf("a create of app:latest went to %s, not n2 which holds it", got)
		}
		if got := place(Request{Image: digestA}); got != "n2" {
			t.Fatalf("a create of %s went to %s, not n2 which holds it", digestA, got)
		}
		if got := place(Request{Image: "base", Warm: WarmKey("gvisor", "base")}); got != "n3" {
			t.Fatalf("a create of base went to %s, not n3 with a warm sandbox", got)
		}
	}
	seen := map[string]bool{}
	for range 40 {
		seen[place(Request{})] = true
	}
	if len(seen) < 3 {
		t.Fatalf("creates with no image went only to %v", seen)
	}
	// n2 full: the bonus does not place past its room.
	if _, err := s.pool.Exec(ctx, `UPDATE nodes SET used_memory_mb = memory_mb WHERE id = 'n2'`); err != nil {
		t.Fatal(err)
	}
	if got := place(Request{Image: "app:latest"}); got == "n2" || !slices.Contains([]string{"n1", "n3", "n4"}, got) {
		t.Fatalf("a create of app:latest went to %s, which is full", got)
	}
}
