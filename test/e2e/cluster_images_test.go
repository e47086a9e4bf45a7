package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// TestClusterImages: an image built through a control plane on node n1
// is fetched by n2, by digest and node to node, when a create placed on
// n2 names it, and the sandbox sees the built file; a node's image
// service opens to the node credential only; an unknown digest is
// refused; a delete through the control plane removes the image from
// every node.
func TestClusterImages(t *testing.T) {
	t.Parallel()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	tc := newTestCluster(t, "control-token-0123456789abcdef", "10s")
	join, token, cluster := tc.join, tc.token, tc.args
	n1 := startClusterNode(t, "n1", append(cluster, "--node-label", "role=a"))
	n2 := startClusterNode(t, "n2", append(cluster, "--node-label", "role=b"))
	c := startControl(t, tc.controlArgs(), token)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	waitFor(t, 30*time.Second, "both nodes ready", func() bool {
		ns := c.nodes()
		return ns["n1"].State == "ready" && ns["n2"].State == "ready"
	})

	// A build through the control plane, on n1 (?node=), streams its
	// progress and ends with the image.
	img := clusterBuild(t, c, "n1", apiv1.BuildRequest{Tag: "test/cluster:1", Spec: apiv1.BuildSpec{
		Base: apiv1.BuildBase{Debian: "bookworm"}, Steps: []apiv1.BuildStep{{Run: apiv1.StringList{"echo built-on-n1 > /built.txt"}}}}})
	if _, err := n1.client.Image(ctx, img.Digest); err != nil {
		t.Fatalf("the build is not on n1: %v", err)
	}
	if _, err := n2.client.Image(ctx, img.Digest); err == nil {
		t.Fatal("the build is on n2 already")
	}
	// Recorded when the build answered, before any heartbeat.
	if nodes := clusterImageNodes(t, c, img.Digest); !slices.Equal(nodes, []string{"n1"}) {
		t.Fatalf("image %s through the control plane is on %v; want n1", img.Digest, nodes)
	}
	if out := viaCLI(t, c, token).mustCLI("image", "ls"); !strings.Contains(out, "NODES") || !strings.Contains(out, "test/cluster:1") {
		t.Fatalf("corral image ls through the control plane:\n%s", out)
	}

	// A create of the tag placed on n2: n2 fetches the image from n1.
	start := time.Now()
	var sb apiv1.Sandbox
	status, body := clusterCall(t, c, "POST", "/v1/sandboxes", `{"image":"test/cluster:1","timeout":300,"node_selector":{"role":"b"}}`)
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &sb) != nil {
		t.Fatalf("create of the image on n2: %d %s", status, body)
	}
	t.Logf("create on n2 with the image fetched from n1: %s", time.Since(start).Round(time.Millisecond))
	if _, err := n2.client.Get(ctx, sb.ID); err != nil {
		t.Fatalf("the create is not on n2: %v", err)
	}
	got, err := n2.client.Image(ctx, "test/cluster:1")
	if err != nil || got.Digest != img.Digest {
		t.Fatalf("n2's copy of test/cluster:1: %+v, %v; want %s", got, err, img.Digest)
	}
	out, _, code := viaCLI(t, c, token).cli("", "exec", sb.ID, "--", "cat", "/built.txt")
	if code != 0 || out != "built-on-n1\n" {
		t.Fatalf("the built file in the sandbox on n2: exit %d %q", code, out)
	}
	insp, err := c.client.Image(ctx, img.Digest)
	if err != nil || len(insp.Layers) != len(img.Layers) || !slices.Contains(insp.Nodes, "n1") || !slices.Contains(insp.Nodes, "n2") {
		t.Fatalf("inspect through the control plane: %+v, %v; want on n1 and n2", insp, err)
	}

	// An unknown digest is refused, by the create and by a node's fetch.
	unknown := "sha256:" + strings.Repeat("0", 64)
	if status, body := clusterCall(t, c, "POST", "/v1/sandboxes", `{"image":"`+unknown+`","timeout":300}`); status != http.StatusNotFound {
		t.Fatalf("create of an unknown digest: %d %s", status, body)
	}
	cred := func(d *daemon, name string) string {
		var id struct{ Nonce string }
		b, err := os.ReadFile(filepath.Join(d.state, "cluster-node.json"))
		if err != nil || json.Unmarshal(b, &id) != nil {
			t.Fatalf("node %s's identity: %v", name, err)
		}
		return nodeauth.Credential(join, name, id.Nonce)
	}
	nodeGet := func(d *daemon, method, path, header, value string) (int, string) {
		req, _ := http.NewRequest(method, d.base()+path, nil)
		req.Header.Set(header, value)
		resp, err := d.httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, b.String()
	}
	recPath := nodeauth.ImagesPath + img.Digest
	for _, tok := range []string{n1.token, token} {
		if status, body := nodeGet(n1, "GET", recPath, "Authorization", "Bearer "+tok); status != http.StatusUnauthorized {
			t.Fatalf("a node's image record with an API token: %d %s", status, body)
		}
	}
	if status, body := nodeGet(n1, "GET", recPath, nodeauth.Header, cred(n2, "n2")); status != http.StatusUnauthorized {
		t.Fatalf("n1's image record with n2's credential: %d %s", status, body)
	}
	if status, body := nodeGet(n1, "GET", recPath, nodeauth.Header, cred(n1, "n1")); status != http.StatusOK || !strings.Contains(body, img.Layers[0]) {
		t.Fatalf("n1's image record with its credential: %d %s", status, body)
	}
	if status, body := nodeGet(n1, "GET", recPath+"/layers/"+unknown, nodeauth.Header, cred(n1, "n1")); status != http.StatusNotFound {
		t.Fatalf("a layer not in the image: %d %s", status, body)
	}
	if status, body := nodeGet(n2, "POST", nodeauth.ImagesPath+unknown+"/fetch", nodeauth.Header, cred(n2, "n2")); status != http.StatusNotFound {
		t.Fatalf("a fetch of an unknown digest: %d %s", status, body)
	}

	clusterCopySteps(t, c, token, n1, n2)

	// A delete through the control plane reaches every node that holds it.
	if _, err := c.client.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.client.RemoveImage(ctx, img.Digest); err != nil {
		t.Fatalf("delete through the control plane: %v", err)
	}
	for _, n := range []*daemon{n1, n2} {
		var ce *corral.Error
		if _, err := n.client.Image(ctx, img.Digest); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
			t.Fatalf("the image on %s after the delete: %v", n.addr, err)
		}
	}
	if nodes := clusterImageNodes(t, c, img.Digest); len(nodes) != 0 {
		t.Fatalf("image %s after the delete is on %v", img.Digest, nodes)
	}
}

// clusterCopySteps: `corral image build` with a copy step works through
// a control plane (the files' layer is uploaded to a node and the build
// runs where it is); a build placed on another node than its uploaded
// layer has the layer fetched there first; a prune through the control
// plane prunes every node and names the node of what it kept.
func clusterCopySteps(t *testing.T, c *controlPlane, token string, n1, n2 *daemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"files/hello.txt": "copied through the control plane\n"})
	cli := viaCLI(t, c, token)
	cli.mustBuild(dir, "base: debian:bookworm\nsteps:\n  - copy: {src: ./files, dst: /opt/files}\n", "-t", "test/copy:1")
	copied, err := c.client.Image(ctx, "test/copy:1")
	if err != nil {
		t.Fatalf("the CLI's build with a copy step through the control plane: %v", err)
	}

	// A layer uploaded on n1, built on n2.
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	content := "fetched from n1\n"
	for _, h := range []*tar.Header{{Name: "opt/", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "opt/fetched/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "opt/fetched/hello.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = tw.Write([]byte(content))
	_ = tw.Close()
	status, body := clusterCall(t, c, "POST", "/v1/images/layers?node=n1", tb.String())
	var layer apiv1.LayerInfo
	if status != http.StatusOK || json.Unmarshal([]byte(body), &layer) != nil {
		t.Fatalf("layer upload through the control plane on n1: %d %s", status, body)
	}
	if status, body := clusterCall(t, c, "GET", "/v1/images/layers/"+layer.Digest, ""); status != http.StatusOK {
		t.Fatalf("the uploaded layer through the control plane: %d %s", status, body)
	}
	if status, body := clusterCall(t, c, "GET", "/v1/images/layers/sha256:"+strings.Repeat("1", 64), ""); status != http.StatusNotFound {
		t.Fatalf("a layer nobody uploaded: %d %s", status, body)
	}
	img := clusterBuild(t, c, "n2", apiv1.BuildRequest{Tag: "test/fetched:1", Spec: apiv1.BuildSpec{
		Base:  apiv1.BuildBase{Image: "test/copy:1"},
		Steps: []apiv1.BuildStep{{Copy: &apiv1.CopyStep{Src: "fetched", Dst: "/opt/fetched", Layer: layer.Digest}}}}})
	var sb apiv1.Sandbox
	status, body = clusterCall(t, c, "POST", "/v1/sandboxes", `{"image":"`+img.Digest+`","timeout":300,"node_selector":{"role":"b"}}`)
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &sb) != nil {
		t.Fatalf("create of the image built on n2: %d %s", status, body)
	}
	for path, want := range map[string]string{"/opt/files/hello.txt": "copied through the control plane\n", "/opt/fetched/hello.txt": content} {
		out, _, code := cli.cli("", "exec", sb.ID, "--", "cat", path)
		if code != 0 || out != want {
			t.Fatalf("%s in the sandbox on n2: exit %d %q; want %q", path, code, out, want)
		}
	}
	clusterSnapshotImage(t, c, sb.ID, n1, n2)
	if _, err := c.client.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}

	// A prune through the control plane: each node's, merged.
	for _, ref := range []string{"test/fetched:1", "test/copy:1", copied.Digest} {
		if err := c.client.RemoveImage(ctx, ref); err != nil {
			t.Fatalf("removing %s through the control plane: %v", ref, err)
		}
	}
	status, body = clusterCall(t, c, "POST", "/v1/images/prune", "")
	var rep apiv1.PruneReport
	if status != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil {
		t.Fatalf("prune through the control plane: %d %s", status, body)
	}
	for _, k := range rep.Kept {
		if k.Node != "n1" && k.Node != "n2" {
			t.Fatalf("a kept item names no node: %+v", k)
		}
	}
}

// clusterSnapshotImage: a memory snapshot of sandbox id (on n2, of an
// image n1 lacks) is restored on n2, which holds it, when nothing else
// decides; a restore placed on n1 has the snapshot's image fetched there
// along with the snapshot.
func clusterSnapshotImage(t *testing.T, c *controlPlane, id string, n1, n2 *daemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := c.client.WriteFile(ctx, id, "/tmp/mark", strings.NewReader("before the snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	sn, err := c.client.SnapshotMemory(ctx, id, "of-fetched")
	if err != nil {
		t.Fatalf("a memory snapshot through the control plane: %v", err)
	}
	restore := func(body string) apiv1.Sandbox {
		t.Helper()
		var sb apiv1.Sandbox
		status, out := clusterCall(t, c, "POST", "/v1/sandboxes", body)
		if status != http.StatusCreated || json.Unmarshal([]byte(out), &sb) != nil {
			t.Fatalf("a create from the snapshot (%s): %d %s", body, status, out)
		}
		return sb
	}
	for range 3 {
		sb := restore(`{"from_snapshot":"of-fetched","timeout":300}`)
		if _, err := n2.client.Get(ctx, sb.ID); err != nil {
			t.Fatalf("a restore went to another node than n2, which holds the snapshot: %v", err)
		}
		if _, err := c.client.Terminate(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n1.client.Image(ctx, sn.Image); err == nil {
		t.Fatalf("n1 holds image %s already", sn.Image)
	}
	sb := restore(`{"from_snapshot":"of-fetched","timeout":300,"node_selector":{"role":"a"}}`)
	if _, err := n1.client.Get(ctx, sb.ID); err != nil {
		t.Fatalf("the restore is not on n1: %v", err)
	}
	out, _, code := viaCLI(t, c, c.token).cli("", "exec", sb.ID, "--", "cat", "/tmp/mark", "/opt/fetched/hello.txt")
	if code != 0 || out != "before the snapshotfetched from n1\n" {
		t.Fatalf("the restore on n1: exit %d %q", code, out)
	}
	if _, err := c.client.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.RemoveSnapshot(ctx, sn.ID); err != nil {
		t.Fatal(err)
	}
}

// clusterImageNodes are the nodes control plane c lists image digest on.
func clusterImageNodes(t *testing.T, c *controlPlane, digest string) []string {
	t.Helper()
	imgs, err := c.client.Images(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		if img.Digest == digest {
			return img.Nodes
		}
	}
	return nil
}

// clusterBuild runs a build through control plane c on node and returns
// the image of its done event.
func clusterBuild(t *testing.T, c *controlPlane, node string, req apiv1.BuildRequest) apiv1.Image {
	t.Helper()
	b, _ := json.Marshal(req)
	r, _ := http.NewRequest("POST", "http://"+c.addr+"/v1/images/build?node="+node, strings.NewReader(string(b)))
	r.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("build through the control plane: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	events := 0
	for sc.Scan() {
		var ev apiv1.BuildEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("build event %q: %v", sc.Text(), err)
		}
		events++
		switch {
		case ev.Type == apiv1.BuildEventError:
			t.Fatalf("build failed: %+v", ev.Error)
		case ev.Type == apiv1.BuildEventDone && ev.Image != nil:
			if events < 2 {
				t.Fatalf("the build's progress did not come through: %d events", events)
			}
			return *ev.Image
		}
	}
	t.Fatalf("build stream ended with no image: %v", sc.Err())
	return apiv1.Image{}
}

// clusterCall sends a raw request to control plane c.
func clusterCall(t *testing.T, c *controlPlane, method, path, body string) (int, string) {
	t.Helper()
	d := &daemon{t: t, addr: c.addr}
	return d.api(method, path, c.token, body)
}
