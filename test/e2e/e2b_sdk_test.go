package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestE2BSDK runs the npm project test/e2b-js (the official e2b SDK,
// pinned, unchanged, under vitest) against a daemon: E2B_API_URL is its
// /e2b prefix and E2B_API_KEY e2b_ and its token. It fails with vitest's
// output.
func TestE2BSDK(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("needs node and npm (the e2b SDK's tests are an npm project)")
	}
	proj, err := filepath.Abs("../e2b-js")
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "--metrics-interval", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	npmEnv := append(os.Environ(), "npm_config_cache="+npmCache(), "npm_config_audit=false", "npm_config_fund=false",
		"npm_config_update_notifier=false")
	ci := exec.CommandContext(ctx, npm, "ci", "--no-progress")
	ci.Dir, ci.Env = proj, npmEnv
	if out, err := ci.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in test/e2b-js: %v\n%s", err, out)
	}
	var out bytes.Buffer
	vt := exec.CommandContext(ctx, filepath.Join(proj, "node_modules", ".bin", "vitest"), "run")
	vt.Dir, vt.Stdout, vt.Stderr = proj, &out, &out
	vt.Env = append(npmEnv, "E2B_API_URL=http://"+d.addr+"/e2b", "E2B_API_KEY=e2b_"+d.token,
		"E2B_SANDBOX_URL=http://127.0.0.1:1", "E2B_DEBUG=false", "NO_COLOR=1", "CI=1")
	err = vt.Run()
	t.Logf("vitest:\n%s", out.String())
	if err != nil {
		t.Fatalf("vitest run in test/e2b-js: %v (its output above)", err)
	}
}

// npmCache is npm's cache: the machine's shared one for root, kept
// between runs.
func npmCache() string {
	if os.Geteuid() == 0 {
		return "/var/cache/corral-npm"
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".npm")
}
