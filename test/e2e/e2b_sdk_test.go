package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
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

// TestE2BBaseTemplate checks the sandbox E2B's "base" template gives, from
// the inside (through the native API, the envd face being another
// package's): user "user" (uid 1000) in /home/user with passwordless sudo,
// bash, python3, curl and git, and the create's envVars.
func TestE2BBaseTemplate(t *testing.T) {
	d := startDaemon(t)
	req, err := http.NewRequest("POST", "http://"+d.addr+"/e2b/v2/sandboxes",
		strings.NewReader(`{"templateID":"base","timeout":120,"envVars":{"GREETING":"hi"},"metadata":{"t":"base"}}`))
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
	var sb struct{ SandboxID, TemplateID string }
	if err := json.Unmarshal(body, &sb); resp.StatusCode != http.StatusCreated || err != nil || sb.TemplateID != "base" {
		t.Fatalf("create from base: %d %s", resp.StatusCode, body)
	}
	script := `id -un; id -u; pwd; echo "$HOME $GREETING"; sudo -n id -un; ` +
		`for c in bash python3 curl git; do command -v $c >/dev/null || echo "missing $c"; done`
	var out, errb bytes.Buffer
	res, err := d.client.Run(context.Background(), sb.SandboxID, apiv1.ExecRequest{Cmd: []string{"/bin/sh", "-c", script}}, nil, &out, &errb)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("inside the base template: %v %+v\n%s%s", err, res, out.String(), errb.String())
	}
	if want := "user\n1000\n/home/user\n/home/user hi\nroot\n"; out.String() != want {
		t.Fatalf("inside the base template:\n%s\nwant:\n%s(stderr: %s)", out.String(), want, errb.String())
	}
}
