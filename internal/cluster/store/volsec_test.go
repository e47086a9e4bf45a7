package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/pgtest"
	"corral/internal/errdefs"
	"corral/internal/seal"
)

// Volume locations: placed on a node with the disk for it (the named one
// when asked), a name taken once, found and listed with the node's
// state, forgotten; a create restricted to the volume's node lands there
// only.
func TestVolumeLocations(t *testing.T) {
	s := open(t, pgtest.Start(t))
	ctx := context.Background()
	small := testNode("small", 4096)
	small.DiskMB = 2048 // room for a 1 GiB volume, not a 4 GiB one
	for _, n := range []Node{testNode("big", 4096), small} {
		if err := s.Register(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.PlaceVolume(ctx, "data", 4, "", time.Minute)
	if err != nil || n.ID != "big" {
		t.Fatalf("a 4 GiB volume placed on %q, %v; want big (the only one with the disk)", n.ID, err)
	}
	if _, err := s.PlaceVolume(ctx, "data", 1, "", time.Minute); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("a second volume named data: %v, want already exists", err)
	}
	if n, err := s.PlaceVolume(ctx, "cache", 1, "small", time.Minute); err != nil || n.ID != "small" {
		t.Fatalf("a volume asked on small: %q, %v", n.ID, err)
	}
	if _, err := s.PlaceVolume(ctx, "huge", 8, "small", time.Minute); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("an 8 GiB volume on small: %v, want resource exhausted", err)
	}
	if _, err := s.VolumeLocation(ctx, "huge"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a refused volume is recorded: %v", err)
	}
	l, err := s.VolumeLocation(ctx, "data")
	if err != nil || l.Node != "big" || l.SizeGiB != 4 || l.NodeState != NodeReady {
		t.Fatalf("location of data: %+v, %v", l, err)
	}
	ls, err := s.VolumeLocations(ctx, []string{"cache", "data", "nope"})
	if err != nil || len(ls) != 2 || ls[0].Name != "cache" || ls[1].Name != "data" {
		t.Fatalf("locations: %+v, %v; want cache and data", ls, err)
	}
	// A create that mounts data reserves on big only.
	p, err := s.Reserve(ctx, Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 64, Node: "big", FreshWithin: time.Minute})
	if err != nil || p.Node.ID != "big" {
		t.Fatalf("reserve on big: %+v, %v", p, err)
	}
	if _, err := s.Reserve(ctx, Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 8192, Node: "big", FreshWithin: time.Minute}); !errors.Is(err, errdefs.ErrResourceExhausted) ||
		!strings.Contains(err.Error(), "node big") {
		t.Fatalf("reserve beyond big's room: %v, want resource exhausted naming big", err)
	}
	// small is lost: its volume says so.
	if _, err := s.pool.Exec(ctx, `UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'small'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkLost(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if l, err := s.VolumeLocation(ctx, "cache"); err != nil || l.NodeState != NodeLost {
		t.Fatalf("cache on a lost node: %+v, %v", l, err)
	}
	if err := s.RemoveVolume(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	all, err := s.Volumes(ctx)
	if err != nil || len(all) != 1 || all[0].Name != "cache" {
		t.Fatalf("volumes: %+v, %v; want cache alone", all, err)
	}
}

// Sealed secrets: a round trip with the join token's key, refused with
// another token's, the row holding neither the value nor anything that
// opens elsewhere (a sealed value moved to another name does not open),
// keys listed, rotate and delete.
func TestClusterSecrets(t *testing.T) {
	s := open(t, pgtest.Start(t))
	ctx := context.Background()
	key := func(join string) *seal.Key {
		k, err := seal.New(nodeauth.SecretKey(join))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k, other := key("join-token-of-this-cluster"), key("join-token-of-another-one")
	const value = "s3cr3t-value-never-in-the-row"
	info, err := s.CreateSecret(ctx, k, "api", []string{"TOKEN"}, map[string]string{"TOKEN": value})
	if err != nil || info.Name != "api" || len(info.Keys) != 1 || info.Keys[0] != "TOKEN" {
		t.Fatalf("create: %+v, %v", info, err)
	}
	if _, err := s.CreateSecret(ctx, k, "api", []string{"X"}, map[string]string{"X": "y"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("create again: %v, want already exists", err)
	}
	v, err := s.SecretValues(ctx, k, "api")
	if err != nil || v["TOKEN"] != value {
		t.Fatalf("values: %v", err)
	}
	if _, err := s.SecretValues(ctx, other, "api"); !errors.Is(err, errdefs.ErrFailedPrecondition) || strings.Contains(err.Error(), value) {
		t.Fatalf("values with another join token's key: %v, want failed precondition without the value", err)
	}
	var row string
	if err := s.pool.QueryRow(ctx, `SELECT t::text FROM cluster_secrets t WHERE name = 'api'`).Scan(&row); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(row, value) || strings.Contains(row, "s3cr3t") || !strings.Contains(row, "sealed:") {
		t.Fatalf("the row holds the value or is not sealed: %s", row)
	}
	// The sealed value copied onto another secret's row does not open.
	if _, err := s.CreateSecret(ctx, k, "other", []string{"A"}, map[string]string{"A": "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE cluster_secrets SET sealed = (SELECT sealed FROM cluster_secrets WHERE name = 'api') WHERE name = 'other'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SecretValues(ctx, k, "other"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("a value moved to another name: %v, want failed precondition", err)
	}
	if _, err := s.RotateSecret(ctx, k, "api", []string{"TOKEN", "USER"}, map[string]string{"TOKEN": "new", "USER": "u"}); err != nil {
		t.Fatal(err)
	}
	if v, err := s.SecretValues(ctx, k, "api"); err != nil || v["TOKEN"] != "new" || v["USER"] != "u" {
		t.Fatalf("rotated values: %v", err)
	}
	if _, err := s.RotateSecret(ctx, k, "nope", []string{"A"}, map[string]string{"A": "b"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("rotate of an unknown secret: %v", err)
	}
	list, err := s.ListSecrets(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "api" || len(list[0].Keys) != 2 || list[1].Name != "other" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if err := s.DeleteSecret(ctx, "api"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SecretInfo(ctx, "api"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("info after delete: %v", err)
	}
	if err := s.DeleteSecret(ctx, "api"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("delete again: %v", err)
	}
}
