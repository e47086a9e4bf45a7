package e2e

import (
	"context"
	"encoding/json"
	"errors"
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

// TestClusterDrain: two nodes and two control planes. A paused sandbox
// with a process and a file in it, and a running one, on n5; `corral node
// drain n5 --wait` through a control plane moves the paused one to n6
// under its id and name, still paused, and leaves the running one with
// the reason; resumed, the moved one has its process (same pid) and its
// file, through either control plane; nothing of it is left on n5.
func TestClusterDrain(t *testing.T) {
	t.Parallel()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	tc := newTestCluster(t, "control-token-0123456789abcdef", "10s")
	n5 := startClusterNode(t, "n5", tc.args)
	n6 := startClusterNode(t, "n6", tc.args)
	a, b := startControl(t, tc.controlArgs(), tc.token), startControl(t, tc.controlArgs(), tc.token)
	cliA, cliB := viaCLI(t, a, tc.token), viaCLI(t, b, tc.token)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// Both on n5.
	if _, err := a.client.DrainNode(ctx, "n6", true); err != nil {
		t.Fatal(err)
	}
	kept, err := a.client.Create(ctx, apiv1.CreateSandboxRequest{Name: "keeper", Timeout: 600})
	if err != nil {
		t.Fatal(err)
	}
	running, err := b.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.DrainNode(ctx, "n6", false); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{kept.ID, running.ID} {
		if _, err := n5.client.Get(ctx, id); err != nil {
			t.Fatalf("sandbox %s is not on n5: %v", id, err)
		}
	}
	setup := `set -e
echo "written before the move" > /tmp/mark
setsid sh -c 'echo $$ > /tmp/pid; exec sleep 1000' </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do test -s /tmp/pid && exit 0; sleep 0.1; done
exit 1`
	cliA.mustCLI("exec", kept.ID, "--", "sh", "-c", setup)
	pid := strings.TrimSpace(cliA.mustCLI("exec", kept.ID, "--", "cat", "/tmp/pid"))
	if _, err := a.client.Pause(ctx, kept.ID); err != nil {
		t.Fatal(err)
	}

	out := cliB.mustCLI("node", "drain", "n5", "--wait")
	t.Logf("corral node drain n5 --wait:\n%s", out)
	if !strings.Contains(out, "moved  "+kept.ID+"  to n6") || !strings.Contains(out, "stays  "+running.ID+"  running") {
		t.Fatalf("the drain's report: %q; want %s moved to n6 and %s left running", out, kept.ID, running.ID)
	}

	// On n6, paused, under its id and name; the running one on n5.
	if sb, err := n6.client.Get(ctx, kept.ID); err != nil || sb.State != "paused" || sb.Name != "keeper" {
		t.Fatalf("the moved sandbox on n6: %+v, %v; want paused, named keeper", sb, err)
	}
	if sb, err := a.client.Get(ctx, "keeper"); err != nil || sb.ID != kept.ID || sb.State != "paused" {
		t.Fatalf("the moved sandbox through a control plane: %+v, %v", sb, err)
	}
	if sb, err := n5.client.Get(ctx, running.ID); err != nil || sb.State != "running" {
		t.Fatalf("the running sandbox on n5: %+v, %v", sb, err)
	}
	// Nothing of it on n5: no record, no directory, no snapshot.
	if _, err := n5.client.Get(ctx, kept.ID); err == nil {
		t.Error("n5 still knows the moved sandbox")
	}
	if _, err := os.Stat(filepath.Join(n5.state, "sandboxes", kept.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("n5 keeps the moved sandbox's directory: %v", err)
	}
	for name, n := range map[string]*daemon{"n5": n5, "n6": n6} {
		if snaps, err := n.client.Snapshots(ctx); err != nil || len(snaps) != 0 {
			t.Errorf("node %s keeps snapshots after the move: %+v, %v", name, snaps, err)
		}
	}
	if all, err := a.client.ListAll(ctx, corral.ListOptions{}); err != nil {
		t.Fatal(err)
	} else if n := countID(all, kept.ID); n != 1 {
		t.Errorf("the merged list holds the moved sandbox %d times; want once", n)
	}
	if ls := cliA.mustCLI("node", "ls"); !strings.Contains(ls, "0 to move, 1 moved, 1 left") || !strings.Contains(ls, running.ID+" stays: running") {
		t.Errorf("corral node ls during the drain:\n%s", ls)
	}

	// The node's move endpoints, with its credential: bad input is a 400
	// naming the field, a sandbox live there a 409.
	for _, c := range []struct {
		path, body string
		status     int
		says       string
	}{
		{apiv1.NodeMoveIn, `{"id": "nope", "snapshot": "snap-zzzzzzzzzzzzzzzz"}`, 400, "is not a sandbox id"},
		{apiv1.NodeMoveIn, `{"id": "` + kept.ID + `", "snapshot": "../x"}`, 400, "neither a snapshot id"},
		{apiv1.NodeMoveIn, `{"id": "` + kept.ID + `", "snapshot": "s", "colour": 1}`, 400, "colour"},
		{apiv1.NodeMoveIn, `{"id": "` + kept.ID + `", "snapshot": "snap-zzzzzzzzzzzzzzzz"}`, 409, "live"},
		{apiv1.NodeMoveRemove + "nope", ``, 400, "is not a sandbox id"},
	} {
		if got := nodePost(t, ctx, n6, tc.join, c.path, c.body); got.status != c.status || !strings.Contains(got.body, c.says) {
			t.Errorf("POST %s %s: %d %s; want %d naming %q", c.path, c.body, got.status, got.body, c.status, c.says)
		}
	}

	// Resumed through one control plane: the same process and file,
	// through both.
	if _, err := b.client.Resume(ctx, kept.ID); err != nil {
		t.Fatal(err)
	}
	for _, cli := range []*daemon{cliA, cliB} {
		got := strings.TrimSpace(cli.mustCLI("exec", kept.ID, "--", "sh", "-c", `kill -0 "$(cat /tmp/pid)" && cat /tmp/pid /tmp/mark`))
		if got != pid+"\nwritten before the move" {
			t.Fatalf("after the move, through %s: %q; want pid %s alive and the file", cli.addr, got, pid)
		}
	}
	if _, err := a.client.DrainNode(ctx, "n5", false); err != nil {
		t.Fatal(err)
	}
}

func countID(sbs []apiv1.Sandbox, id string) int {
	n := 0
	for _, sb := range sbs {
		if sb.ID == id {
			n++
		}
	}
	return n
}

// nodePost posts body to path on node n with its node credential.
func nodePost(t *testing.T, ctx context.Context, n *daemon, join, path, body string) answer {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.state, "cluster-node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var id struct{ Name, Nonce string }
	if err := json.Unmarshal(b, &id); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", n.base()+path, strings.NewReader(body))
	req.Header.Set(nodeauth.Header, nodeauth.Credential(join, id.Name, id.Nonce))
	resp, err := n.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(out)}
}
