package store

import (
	"context"
	"testing"

	"corral/internal/cluster/pgtest"
)

// A node's fingerprint is found by any way of writing its API or envd
// address, only with its credential, and replaced by a new one.
func TestTLSPins(t *testing.T) {
	s := open(t, pgtest.Start(t))
	ctx := context.Background()
	n := testNode("n1", 1024)
	n.Address, n.EnvdAddress = "https://10.0.0.1:7000", "https://10.0.0.1:7001/"
	if err := s.Register(ctx, n); err != nil {
		t.Fatal(err)
	}
	other := testNode("n2", 1024)
	other.Address = "https://10.0.0.2:7000"
	if err := s.Register(ctx, other); err != nil {
		t.Fatal(err)
	}
	if pins, err := s.TLSPins(ctx, []string{"https://10.0.0.1:7000"}); err != nil || len(pins) != 0 {
		t.Fatalf("before any fingerprint: %v %v", pins, err)
	}
	if err := s.SetTLSFingerprint(ctx, "n1", "wrong", "sha256:aa"); err == nil {
		t.Fatal("a fingerprint set without the node's credential")
	}
	for _, fp := range []string{"sha256:aa", "sha256:bb"} {
		if err := s.SetTLSFingerprint(ctx, "n1", n.CredentialHash, fp); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"https://10.0.0.1:7000", "https://10.0.0.1:7001/"} {
			pins, err := s.TLSPins(ctx, []string{u, u + "/"})
			if err != nil || len(pins) != 1 || pins[0] != (NodePin{Node: "n1", Fingerprint: fp}) {
				t.Fatalf("%s: %v %v, want n1 %s", u, pins, err, fp)
			}
		}
	}
	if pins, err := s.TLSPins(ctx, []string{"https://10.0.0.3:7000"}); err != nil || len(pins) != 0 {
		t.Fatalf("an address no node has: %v %v", pins, err)
	}
	if fps, err := s.TLSFingerprints(ctx); err != nil || len(fps) != 1 || fps["n1"] != "sha256:bb" {
		t.Fatalf("fingerprints by node: %v %v", fps, err)
	}
}
