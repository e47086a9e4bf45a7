package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2BSDK runs the npm project test/e2b-js (the official e2b SDK,
// pinned, unchanged, under vitest) against a daemon: E2B_API_URL is its
// /e2b prefix, E2B_API_KEY e2b_ and its token, E2B_SANDBOX_URL its envd
// face. Then the SDK's debug mode (E2B_DEBUG=true: no control plane, one
// sandbox, no access token) runs the commands and files tests against the
// sandbox the daemon's --envd-debug-sandbox names. Each fails with
// vitest's output. E2B_JS_FILES (vitest filters, space-separated) narrows
// the first run.
func TestE2BSDK(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("needs node and npm (the e2b SDK's tests are an npm project)")
	}
	proj, err := filepath.Abs("../e2b-js")
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "--metrics-interval", "1s", "--envd-debug-sandbox", e2bDebugSandbox)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	npmEnv := append(os.Environ(), "npm_config_cache="+npmCache(), "npm_config_audit=false", "npm_config_fund=false",
		"npm_config_update_notifier=false")
	ci := exec.CommandContext(ctx, npm, "ci", "--no-progress")
	ci.Dir, ci.Env = proj, npmEnv
	if out, err := ci.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in test/e2b-js: %v\n%s", err, out)
	}
	env := append(npmEnv, "E2B_API_URL=http://"+d.addr+"/e2b", "E2B_API_KEY=e2b_"+d.token,
		"E2B_SANDBOX_URL=http://"+d.envd, "NO_COLOR=1", "CI=1")
	t.Run("sdk", func(t *testing.T) {
		vitest(ctx, t, proj, append(env, "E2B_DEBUG=false"), strings.Fields(os.Getenv("E2B_JS_FILES"))...)
	})
	t.Run("debug", func(t *testing.T) {
		startDebugSandbox(ctx, t, d)
		vitest(ctx, t, proj, append(env, "E2B_DEBUG=true"), "tests/commands.test.mjs", "tests/files.test.mjs")
	})
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
