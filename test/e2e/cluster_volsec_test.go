package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// TestClusterVolumesSecrets: two nodes and a control plane. A volume
// created through the control plane lives on one node; a file put
// through the control plane is read in a sandbox that mounts it, which
// lands on that node; volumes on two nodes in one create are 409 naming
// them; removing a volume in use is the node's 409. A secret created
// through the control plane is injected as env into sandboxes on both
// nodes, a rotation is seen by the next sandbox, listing shows names and
// keys only, and neither the database's row nor the control plane's log
// holds the value. A volume whose node is lost answers so.
func TestClusterVolumesSecrets(t *testing.T) {
	t.Parallel()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	tc := newTestCluster(t, "control-token-0123456789abcdef", "3s")
	nodes := map[string]*daemon{"n5": startClusterNode(t, "n5", tc.args), "n6": startClusterNode(t, "n6", tc.args)}
	c := startControl(t, tc.controlArgs(), tc.token)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const value, rotated = "v4lue-0f-the-cluster-secret", "r0tated-value-0f-the-secret"

	// A volume, anywhere; a second one on the other node (?node=).
	va, err := c.client.CreateVolume(ctx, "vol-a", 1)
	if err != nil {
		t.Fatalf("a volume through the control plane: %v", err)
	}
	home := va.Node
	other := map[string]string{"n5": "n6", "n6": "n5"}[home]
	if other == "" {
		t.Fatalf("vol-a's node is %q", home)
	}
	if _, err := nodes[home].client.Volume(ctx, "vol-a"); err != nil {
		t.Fatalf("vol-a is not on its node %s: %v", home, err)
	}
	if st, body := c.request("POST", "/v1/volumes?node="+other, `{"name":"vol-b","size_gib":1}`); st != http.StatusCreated || !strings.Contains(body, `"node":"`+other+`"`) {
		t.Fatalf("vol-b on %s: %d %s", other, st, body)
	}
	if st, body := c.request("POST", "/v1/volumes", `{"name":"vol-a"}`); st != http.StatusConflict {
		t.Fatalf("a second vol-a: %d %s; want 409", st, body)
	}
	if st, body := c.request("POST", "/v1/volumes", `{"name":"Bad/Name"}`); st != http.StatusBadRequest {
		t.Fatalf("a bad volume name: %d %s; want 400", st, body)
	}
	if _, err := c.client.WriteVolumeFile(ctx, "vol-a", "/hello.txt", strings.NewReader("through the control plane"), 0o644); err != nil {
		t.Fatalf("a file put into vol-a through the control plane: %v", err)
	}
	if ents, err := c.client.ListVolumeDir(ctx, "vol-a", "/"); err != nil || !hasVolumeEntry(ents, "hello.txt") {
		t.Fatalf("vol-a's listing through the control plane: %+v, %v", ents, err)
	}

	// The secret, sealed by the control plane.
	if _, err := c.client.CreateSecret(ctx, "api", map[string]string{"API_TOKEN": value}); err != nil {
		t.Fatalf("a secret through the control plane: %v", err)
	}
	printenv := func(id string) string {
		t.Helper()
		var out bytes.Buffer
		if _, err := c.client.Run(ctx, id, apiv1.ExecRequest{Cmd: []string{"printenv", "API_TOKEN"}}, nil, &out, io.Discard); err != nil {
			t.Fatalf("printenv in %s: %v", id, err)
		}
		return strings.TrimSpace(out.String())
	}
	onNode := func(id, node string) {
		t.Helper()
		if _, err := nodes[node].client.Get(ctx, id); err != nil {
			t.Fatalf("sandbox %s is not on %s, which holds its volume: %v", id, node, err)
		}
	}

	// A sandbox with vol-a lands on its node, reads the file and has the
	// secret; one with vol-b on the other node, the secret too.
	sa, err := c.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 300, Secrets: []string{"api"},
		Volumes: []apiv1.VolumeMount{{Name: "vol-a", Path: "/data"}}})
	if err != nil {
		t.Fatalf("a create with vol-a: %v", err)
	}
	onNode(sa.ID, home)
	var file bytes.Buffer
	if res, err := c.client.Run(ctx, sa.ID, apiv1.ExecRequest{Cmd: []string{"cat", "/data/hello.txt"}}, nil, &file, io.Discard); err != nil || res.ExitCode != 0 || file.String() != "through the control plane" {
		t.Fatalf("reading the volume's file in the sandbox: %q, %+v, %v", file.String(), res, err)
	}
	sb, err := c.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 300, Secrets: []string{"api"},
		Volumes: []apiv1.VolumeMount{{Name: "vol-b", Path: "/data"}}})
	if err != nil {
		t.Fatalf("a create with vol-b: %v", err)
	}
	onNode(sb.ID, other)
	for _, id := range []string{sa.ID, sb.ID} {
		if got := printenv(id); got != value {
			t.Fatalf("API_TOKEN in %s: %q", id, got)
		}
	}

	// Volumes of two nodes in one create; an unknown one; a volume in use.
	var ce *corral.Error
	_, err = c.client.Create(ctx, apiv1.CreateSandboxRequest{Volumes: []apiv1.VolumeMount{{Name: "vol-a", Path: "/a"}, {Name: "vol-b", Path: "/b"}}})
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict || !strings.Contains(err.Error(), "vol-a on node "+home) || !strings.Contains(err.Error(), "vol-b on node "+other) {
		t.Fatalf("a create with volumes on two nodes: %v; want 409 naming both", err)
	}
	if _, err := c.client.Create(ctx, apiv1.CreateSandboxRequest{Volumes: []apiv1.VolumeMount{{Name: "vol-zz", Path: "/z"}}}); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Fatalf("a create with an unknown volume: %v; want 404", err)
	}
	if err := c.client.RemoveVolume(ctx, "vol-a", false); !errors.As(err, &ce) || ce.Status != http.StatusConflict {
		t.Fatalf("removing vol-a while mounted: %v; want the node's 409", err)
	}

	// Rotated: the next sandbox sees the new value.
	if _, err := c.client.RotateSecret(ctx, "api", map[string]string{"API_TOKEN": rotated}); err != nil {
		t.Fatal(err)
	}
	sc, err := c.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 300, Secrets: []string{"api"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := printenv(sc.ID); got != rotated {
		t.Fatalf("API_TOKEN after the rotation: %q", got)
	}
	// Names and keys only, everywhere the secret shows.
	st, body := c.request("GET", "/v1/secrets", "")
	if st != http.StatusOK || !strings.Contains(body, `"name":"api"`) || !strings.Contains(body, "API_TOKEN") || strings.Contains(body, value) || strings.Contains(body, rotated) {
		t.Fatalf("the secrets' list: %d %s", st, body)
	}
	if own, err := nodes[other].client.Secrets(ctx); err != nil || len(own) != 1 || own[0].Name != "api" {
		t.Fatalf("a node's own list of secrets is the cluster's: %+v, %v", own, err)
	}
	conn, err := pgx.Connect(ctx, tc.args[1])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var row string
	if err := conn.QueryRow(ctx, `SELECT t::text FROM cluster_secrets t WHERE name = 'api'`).Scan(&row); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(row, rotated) || strings.Contains(row, value) || !strings.Contains(row, "sealed:") {
		t.Fatalf("the database's row: %s", row)
	}

	// The list names each volume's node.
	vols, err := c.client.Volumes(ctx)
	if err != nil || len(vols) != 2 || vols[0].Node != home || vols[1].Node != other || len(vols[0].MountedBy) != 1 {
		t.Fatalf("the cluster's volumes: %+v, %v", vols, err)
	}
	if out := viaCLI(t, c, tc.token).mustCLI("volume", "ls"); !strings.Contains(out, "NODE") || !strings.Contains(out, other) {
		t.Fatalf("corral volume ls through the control plane:\n%s", out)
	}
	for _, id := range []string{sa.ID, sb.ID, sc.ID} {
		if _, err := c.client.Terminate(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.client.RemoveVolume(ctx, "vol-a", false); err != nil {
		t.Fatalf("removing vol-a once unmounted: %v", err)
	}
	if _, err := nodes[home].client.Volume(ctx, "vol-a"); err == nil {
		t.Fatal("vol-a is still on its node after its removal")
	}
	if _, err := c.client.Volume(ctx, "vol-a"); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Fatalf("vol-a after its removal: %v; want 404", err)
	}

	// vol-b's node lost: its volume and a create that mounts it say so.
	nodes[other].kill9()
	waitFor(t, 30*time.Second, other+" lost", func() bool { return c.nodes()[other].State == "lost" })
	if _, err := c.client.Volume(ctx, "vol-b"); !errors.As(err, &ce) || ce.Status != http.StatusConflict || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("a volume on a lost node: %v; want 409 naming it lost", err)
	}
	if _, err := c.client.Create(ctx, apiv1.CreateSandboxRequest{Volumes: []apiv1.VolumeMount{{Name: "vol-b", Path: "/b"}}}); !errors.As(err, &ce) || ce.Status != http.StatusConflict {
		t.Fatalf("a create with a lost node's volume: %v; want 409", err)
	}
	if st, body := c.request("GET", "/v1/volumes", ""); st != http.StatusOK || !strings.Contains(body, `"name":"vol-b"`) || !strings.Contains(body, `"node":"`+other+`"`) {
		t.Fatalf("the list with vol-b's node lost: %d %s; want vol-b from the database", st, body)
	}
	// Back, it serves the volume again, and the volume is removed.
	nodes[other].start()
	waitFor(t, 30*time.Second, other+" ready again", func() bool { return c.nodes()[other].State == "ready" })
	if err := c.client.RemoveVolume(ctx, "vol-b", false); err != nil {
		t.Fatalf("removing vol-b once its node is back: %v", err)
	}
	if vols, err := c.client.Volumes(ctx); err != nil || len(vols) != 0 {
		t.Fatalf("the cluster's volumes at the end: %+v, %v", vols, err)
	}
	if st, body := c.request("GET", "/v1/audit/export", ""); st != http.StatusOK || strings.Contains(body, value) || strings.Contains(body, rotated) {
		t.Fatalf("the cluster's audit export: %d, or it holds the secret's value", st)
	}
	if log := c.log.String(); strings.Contains(log, value) || strings.Contains(log, rotated) {
		t.Fatal("the control plane's log holds the secret's value")
	}
	for name, n := range nodes {
		if log := n.log.String(); strings.Contains(log, value) || strings.Contains(log, rotated) {
			t.Fatalf("node %s's log holds the secret's value", name)
		}
	}
}

// request sends one request with the control plane's token; the answer's
// status and body.
func (c *controlPlane) request(method, path, body string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, "http://"+c.addr+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func hasVolumeEntry(ents []apiv1.Entry, name string) bool {
	for _, e := range ents {
		if e.Name == name {
			return true
		}
	}
	return false
}
