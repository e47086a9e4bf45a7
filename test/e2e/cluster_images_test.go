package e2e

import (
	"bufio"
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
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	tc := newTestCluster(t, "control-token-0123456789abcdef", "10s")
	join, token, cluster := tc.join, tc.token, tc.args
	n1 := startClusterNode(t, "n1", 3, append(cluster, "--node-label", "role=a"))
	n2 := startClusterNode(t, "n2", 4, append(cluster, "--node-label", "role=b"))
	c := startControl(t, tc.controlArgs(), token)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	clusterWait(t, 30*time.Second, "both nodes ready", func() bool {
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
