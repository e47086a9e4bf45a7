package store

import (
	"context"
	"testing"
	"time"

	"corral/internal/cluster/pgtest"
)

// Uploaded layers are found on the ready nodes that hold them, newest
// record first; a forgotten one and a lost node's are not.
func TestLayerLocations(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	s := open(t, url)
	for _, id := range []string{"n1", "n2"} {
		if err := s.Register(ctx, testNode(id, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []NodeLayer{{Node: "n1", Digest: digestA, Size: 5}, {Node: "n2", Digest: digestA, Size: 5}, {Node: "n1", Digest: digestB, Size: 7}} {
		if err := s.RecordLayer(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordLayer(ctx, NodeLayer{Node: "n1", Digest: digestA, Size: 5}); err != nil {
		t.Fatal(err) // again: the newest record
	}
	hs, err := s.LayerHolders(ctx, []string{digestA, digestB, "sha256:cccc"})
	if err != nil {
		t.Fatal(err)
	}
	if got := hs[digestA]; len(got) != 2 || got[0].Node != "n1" || got[1].Node != "n2" {
		t.Errorf("holders of A: %+v", got)
	}
	if got := hs[digestB]; len(got) != 1 || got[0].Node != "n1" || got[0].Size != 7 {
		t.Errorf("holders of B: %+v", got)
	}
	if _, ok := hs["sha256:cccc"]; ok {
		t.Errorf("a layer nobody holds has holders: %+v", hs["sha256:cccc"])
	}
	if err := s.ForgetLayer(ctx, "n1", digestB); err != nil {
		t.Fatal(err)
	}
	// n2 falls silent and is marked lost: its layers are out of reach.
	time.Sleep(1100 * time.Millisecond) // n2's heartbeat ages past MarkLost's second
	if _, err := s.Heartbeat(ctx, testNode("n1", 4096), nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkLost(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	hs, err = s.LayerHolders(ctx, []string{digestA, digestB})
	if err != nil {
		t.Fatal(err)
	}
	if got := hs[digestA]; len(got) != 1 || got[0].Node != "n1" {
		t.Errorf("holders of A with n2 lost: %+v", got)
	}
	if got := hs[digestB]; len(got) != 0 {
		t.Errorf("holders of a forgotten layer: %+v", got)
	}
}
