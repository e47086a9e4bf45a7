package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"corral/pkg/apiv1"
)

// e2bDebugSandbox names the sandbox TestE2BSDK's debug run reaches (the
// daemon's --envd-debug-sandbox).
const e2bDebugSandbox = "e2b-debug"

// vitest runs `vitest run` in proj with env, failing t with its output.
func vitest(ctx context.Context, t *testing.T, proj string, env []string, filters ...string) {
	t.Helper()
	var out bytes.Buffer
	vt := exec.CommandContext(ctx, filepath.Join(proj, "node_modules", ".bin", "vitest"), append([]string{"run"}, filters...)...)
	vt.Dir, vt.Stdout, vt.Stderr, vt.Env = proj, &out, &out, env
	err := vt.Run()
	t.Logf("vitest:\n%s", out.String())
	if err != nil {
		t.Fatalf("vitest run in test/e2b-js: %v (its output above)", err)
	}
}

// startDebugSandbox starts the sandbox the SDK's debug mode reaches: the
// base template's image (an E2B create builds it if no test has), under
// the name the daemon's --envd-debug-sandbox gives.
func startDebugSandbox(ctx context.Context, t *testing.T, d *daemon) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+d.addr+"/e2b/v2/sandboxes",
		strings.NewReader(`{"templateID":"base","timeout":60}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-KEY", "e2b_"+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create from base: %d %s", resp.StatusCode, body)
	}
	if _, err := d.client.Create(ctx, apiv1.CreateSandboxRequest{Name: e2bDebugSandbox, Image: "e2b/base:latest", Timeout: 1800}); err != nil {
		t.Fatalf("creating the debug sandbox: %v", err)
	}
}
