package node

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"corral/internal/audit"
	"corral/internal/cluster/pgtest"
	"corral/internal/cluster/store"
	"corral/internal/records"
	"corral/internal/seal"
)

// openTrail is a node's audit trail in a fresh SQLite store.
func openTrail(t *testing.T) *audit.Trail {
	t.Helper()
	ctx := context.Background()
	st, err := records.Open(ctx, filepath.Join(t.TempDir(), "corral.db"), seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tr, err := audit.Open(ctx, audit.Config{Store: st, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// verifyShipped walks node's chain as shipped.
func verifyShipped(t *testing.T, st *store.Store, node string) (*audit.Break, int64) {
	t.Helper()
	var v audit.Verifier
	err := st.WalkAudit(context.Background(), node, func(e store.AuditEntry) error {
		v.Add(audit.Entry{Seq: e.Seq, Time: e.Time, Kind: e.Kind, SandboxID: e.SandboxID, Caller: e.Caller, Fields: e.Fields,
			PrevHash: e.PrevHash, Hash: e.Hash})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, n, _ := v.Result()
	return b, n
}

// A shipper tails the trail from what the database holds: a second one
// (a restart) ships only what is new; a prune on the node (its
// checkpoint) leaves the shipped chain verifying, unless it pruned
// entries not shipped yet (a gap); a trail that is not
// the one the database holds for the name is not shipped.
func TestShipAuditTrail(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Register(ctx, store.Node{ID: "n1", Address: "http://127.0.0.1:1", CPUMilli: 1000, MemoryMB: 1024, DiskMB: 1024,
		MaxSandboxes: 1, Runtimes: []string{"gvisor"}, CredentialNonce: "x", CredentialHash: "y"}); err != nil {
		t.Fatal(err)
	}
	tr := openTrail(t)
	newShipper := func(tr *audit.Trail) *shipper {
		return &shipper{st: st, node: "n1", trail: tr, log: slog.New(slog.DiscardHandler), auditAt: -1}
	}
	record := func(n int) {
		for range n {
			tr.Record("exec", "sb-1", "token:abc", map[string]string{"cmd": "true"})
		}
		tr.Record("api", "", "", nil)
	}
	record(4)
	if err := newShipper(tr).shipAudit(ctx); err != nil {
		t.Fatal(err)
	}
	record(2)
	sh := newShipper(tr)
	if err := sh.shipAudit(ctx); err != nil {
		t.Fatal(err)
	}
	// A prune on the node of what was shipped: every entry so far goes,
	// a checkpoint comes.
	if err := tr.Prune(ctx, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	record(1)
	if err := sh.shipAudit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sh.shipAudit(ctx); err != nil {
		t.Fatal(err)
	}
	if b, n := verifyShipped(t, st, "n1"); b != nil || n != 11 {
		t.Fatalf("shipped chain: %v, %d entries; want 11 whole (5, 3, the checkpoint, 2)", b, n)
	}
	if seq, _, _ := st.AuditHead(ctx, "n1"); seq != 11 {
		t.Fatalf("head shipped %d, want 11", seq)
	}
	// Entries pruned before they were shipped are a gap in the shipped
	// chain, reported as removed.
	record(2)
	if err := tr.Prune(ctx, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := sh.shipAudit(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _ := verifyShipped(t, st, "n1"); b == nil || b.Seq != 12 || b.Problem != audit.Removed {
		t.Fatalf("entries 12 to 14 pruned unshipped: %v; want entry 12 removed", b)
	}

	// Another state dir's trail under the same name: its entry 15 is
	// another, and nothing of it is shipped.
	other := openTrail(t)
	for range 16 {
		other.Record("api", "", "someone-else", nil)
	}
	if err := newShipper(other).shipAudit(ctx); err != nil {
		t.Fatal(err)
	}
	if seq, _, _ := st.AuditHead(ctx, "n1"); seq != 15 {
		t.Fatalf("head after another trail's shipper ran: %d, want 15 (nothing shipped)", seq)
	}
}
