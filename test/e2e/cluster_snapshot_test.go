package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// TestClusterSnapshots: two nodes and a control plane. A memory snapshot
// taken through the control plane on one node restores on the other (a
// file written before it is read in the copy), a fork through the control
// plane puts copies on both nodes, each with the file and the forked_from
// tag, and leaves no snapshot of its own behind; bad input is refused.
func TestClusterSnapshots(t *testing.T) {
	t.Parallel()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	tc := newTestCluster(t, "control-token-0123456789abcdef", "10s")
	cluster := tc.args
	nodes := map[string]*daemon{"n3": startClusterNode(t, "n3", cluster), "n4": startClusterNode(t, "n4", cluster)}
	c := startControl(t, tc.controlArgs(), tc.token)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	nodeOf := func(id string) string {
		t.Helper()
		for name, n := range nodes {
			if sb, err := n.client.Get(ctx, id); err == nil && sb.State == "running" {
				return name
			}
		}
		t.Fatalf("sandbox %s runs on no node", id)
		return ""
	}
	readMark := func(id string) string {
		t.Helper()
		rc, _, err := c.client.ReadFile(ctx, id, "/tmp/mark")
		if err != nil {
			t.Fatalf("reading /tmp/mark in %s: %v", id, err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return string(b)
	}

	parent, err := c.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 300, Tags: map[string]string{"team": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	home := nodeOf(parent.ID)
	other := map[string]string{"n3": "n4", "n4": "n3"}[home]
	if _, err := c.client.WriteFile(ctx, parent.ID, "/tmp/mark", strings.NewReader("before the snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	sn, err := c.client.SnapshotMemory(ctx, parent.ID, "base")
	if err != nil {
		t.Fatalf("a memory snapshot through the control plane: %v", err)
	}
	// Both nodes registered the version their snapshots carry.
	for name, n := range c.nodes() {
		if v := n.RuntimeVersions["gvisor"]; v != sn.RuntimeVersion {
			t.Fatalf("node %s registered gvisor %q; the snapshot was taken by %q", name, v, sn.RuntimeVersion)
		}
	}
	if got, err := c.client.Snapshot(ctx, "base"); err != nil || got.ID != sn.ID {
		t.Fatalf("the snapshot by name through the control plane: %+v, %v", got, err)
	}
	// A node's snapshot stream opens with the node credential only, not
	// the node's own API token.
	req, _ := http.NewRequestWithContext(ctx, "GET", nodes[home].base()+apiv1.NodeSnapshotExport+sn.ID, nil)
	req.Header.Set("Authorization", "Bearer "+nodes[home].token)
	if resp, err := nodes[home].httpClient().Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a snapshot's export with the node's API token: %v, %v; want 401", resp, err)
	} else {
		resp.Body.Close()
	}

	// With its node drained, a create from the snapshot goes to the other
	// node, which is sent the snapshot first.
	if _, err := c.client.DrainNode(ctx, home, true); err != nil {
		t.Fatal(err)
	}
	restored, err := c.client.Create(ctx, apiv1.CreateSandboxRequest{FromSnapshot: "base", Timeout: 300})
	if err != nil {
		t.Fatalf("a create from the snapshot on the other node: %v", err)
	}
	if got := nodeOf(restored.ID); got != other {
		t.Fatalf("the restored copy runs on %s, want %s", got, other)
	}
	if got := readMark(restored.ID); got != "before the snapshot" {
		t.Fatalf("the copy on %s reads %q", other, got)
	}
	if _, err := nodes[other].client.Snapshot(ctx, sn.ID); err != nil {
		t.Fatalf("the node the snapshot was sent to does not keep it: %v", err)
	}
	if _, err := c.client.DrainNode(ctx, home, false); err != nil {
		t.Fatal(err)
	}

	// A node refuses, with the node credential, a snapshot of another
	// runtime version (409 naming both) and an entry outside the
	// snapshot's files (400).
	versions := importStatus(t, ctx, nodes[other], tc.join, `{"snapshot":{"ID":"snap-zzzzzzzzzzzzzzzz","Runtime":"gvisor","RuntimeVersion":"runsc-from-another-year","AgentProtocol":1}}`, "files/x")
	if versions.status != http.StatusConflict || !strings.Contains(versions.body, "runsc-from-another-year") {
		t.Errorf("an import of another runtime version: %d %s; want 409 naming it", versions.status, versions.body)
	}
	good, err := nodes[other].client.Snapshot(ctx, sn.ID)
	if err != nil {
		t.Fatal(err)
	}
	escape := importStatus(t, ctx, nodes[home], tc.join, `{"snapshot":{"ID":"snap-yyyyyyyyyyyyyyyy","Runtime":"gvisor","RuntimeVersion":"`+good.RuntimeVersion+`","AgentProtocol":`+fmt.Sprint(good.AgentProtocol)+`}}`, "files/../../escape")
	if escape.status != http.StatusBadRequest || !strings.Contains(escape.body, "not a path inside") {
		t.Errorf("an import with an entry outside its files: %d %s; want 400", escape.status, escape.body)
	}

	// Bad input.
	for _, bad := range []struct {
		name   string
		call   func() error
		status int
	}{
		{"count 0", func() error { _, err := c.client.Fork(ctx, parent.ID, 0); return err }, http.StatusBadRequest},
		{"count 101", func() error { _, err := c.client.Fork(ctx, parent.ID, 101); return err }, http.StatusBadRequest},
		{"unknown snapshot", func() error {
			_, err := c.client.Create(ctx, apiv1.CreateSandboxRequest{FromSnapshot: "nothere"})
			return err
		}, http.StatusNotFound},
	} {
		var ce *corral.Error
		if err := bad.call(); !errors.As(err, &ce) || ce.Status != bad.status {
			t.Errorf("%s: %v, want %d", bad.name, err, bad.status)
		}
	}

	// Each node takes 3 and holds 1 now: 3 copies land on both.
	copies, err := c.client.Fork(ctx, parent.ID, 3)
	if err != nil {
		t.Fatalf("a fork through the control plane: %v", err)
	}
	on := map[string]int{}
	for _, cp := range copies {
		on[nodeOf(cp.ID)]++
		if cp.Tags["corral.forked_from"] != parent.ID || cp.Tags["team"] != "x" {
			t.Errorf("copy %s's tags: %v", cp.ID, cp.Tags)
		}
		if got := readMark(cp.ID); got != "before the snapshot" {
			t.Errorf("copy %s reads %q", cp.ID, got)
		}
	}
	if len(copies) != 3 || on["n3"] == 0 || on["n4"] == 0 {
		t.Fatalf("the fork's copies: %d, by node %v; want 3 on both nodes", len(copies), on)
	}
	t.Logf("snapshot %s taken on %s, restored on %s; fork copies by node: %v", sn.ID, home, other, on)
	// The fork's own snapshot is gone everywhere; the named one stays.
	for name, n := range nodes {
		snaps, err := n.client.Snapshots(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range snaps {
			if s.ID != sn.ID {
				t.Errorf("node %s keeps snapshot %s (%s) after the fork", name, s.ID, s.Name)
			}
		}
	}
	if all, err := c.client.Snapshots(ctx); err != nil || len(all) != 1 || all[0].ID != sn.ID {
		t.Fatalf("the cluster's snapshots after the fork: %+v, %v; want base only", all, err)
	}

	// Removed through the control plane, it goes from both nodes.
	if _, err := c.client.RemoveSnapshot(ctx, "base"); err != nil {
		t.Fatal(err)
	}
	for name, n := range nodes {
		if _, err := n.client.Snapshot(ctx, sn.ID); err == nil {
			t.Errorf("node %s keeps the removed snapshot", name)
		}
	}
	if _, err := c.client.Snapshot(ctx, "base"); err == nil {
		t.Error("the control plane still finds the removed snapshot")
	}
}

type answer struct {
	status int
	body   string
}

// importStatus posts a snapshot stream of record and one file entry to
// node n's import endpoint with its node credential (derived as a control
// plane does, from the join token and the nonce in its state dir).
func importStatus(t *testing.T, ctx context.Context, n *daemon, join, record, entry string) answer {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.state, "cluster-node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var id struct{ Name, Nonce string }
	if err := json.Unmarshal(b, &id); err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	tw := tar.NewWriter(&stream)
	for _, e := range []struct{ name, body string }{{"snapshot.json", record}, {entry, "x"}} {
		_ = tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(e.body))})
		_, _ = tw.Write([]byte(e.body))
	}
	tw.Close()
	req, _ := http.NewRequestWithContext(ctx, "POST", n.base()+apiv1.NodeSnapshotImport, &stream)
	req.Header.Set(nodeauth.Header, nodeauth.Credential(join, id.Name, id.Nonce))
	resp, err := n.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(body)}
}
