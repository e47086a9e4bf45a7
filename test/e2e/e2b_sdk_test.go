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

	"connectrpc.com/connect"

	"corral/pkg/apiv1"
)

// TestE2BSDK runs the npm project test/e2b-js (the official e2b SDK,
// pinned, unchanged, under vitest) against a daemon: E2B_API_URL is its
// /e2b prefix, E2B_API_KEY e2b_ and its token, E2B_SANDBOX_URL its envd
// face. Then the SDK's debug mode (E2B_DEBUG=true: no control plane, one
// sandbox, no access token) runs the commands and files tests against the
// sandbox the daemon's --envd-debug-sandbox names. Each fails with
// vitest's output. E2B_JS_FILES (vitest filters, space-separated) narrows
// the first run. Last, the commands tests run on vm sandboxes, against a
// daemon whose E2B face creates them there (--e2b-runtime vm).
func TestE2BSDK(t *testing.T) {
	t.Parallel()
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
	npmEnv := npmEnviron()
	npmCI(ctx, t, npm, proj, npmEnv)
	env := append(npmEnv, "E2B_API_URL=http://"+d.addr+"/e2b", "E2B_API_KEY=e2b_"+d.token,
		"E2B_SANDBOX_URL=http://"+d.envd, "NO_COLOR=1", "CI=1")
	t.Run("sdk", func(t *testing.T) {
		vitest(ctx, t, proj, append(env, "E2B_DEBUG=false"), strings.Fields(os.Getenv("E2B_JS_FILES"))...)
	})
	t.Run("debug", func(t *testing.T) {
		startDebugSandbox(ctx, t, d)
		vitest(ctx, t, proj, append(env, "E2B_DEBUG=true"), "tests/commands.test.mjs", "tests/files.test.mjs")
	})
	t.Run("vm", func(t *testing.T) {
		// E2B's API has no runtime field: the operator's --e2b-runtime vm
		// puts what its clients create on QEMU guests, and the SDK's
		// commands run there the same.
		// One daemon at a time: the e2e daemons share their network
		// table, pool and log group. (teardown runs again at the end,
		// and finds nothing left to do.)
		d.teardown()
		vd := startDaemon(t, "--e2b-runtime", "vm")
		probe := e2bCreate(t, vd, `{"templateID":"base","timeout":120}`)
		if sb, err := vd.client.Get(ctx, probe.SandboxID); err != nil || sb.Runtime != "vm" {
			t.Fatalf("a create through the E2B face of a --e2b-runtime vm daemon: %+v %v", sb, err)
		}
		venv := append(npmEnv, "E2B_API_URL=http://"+vd.addr+"/e2b", "E2B_API_KEY=e2b_"+vd.token,
			"E2B_SANDBOX_URL=http://"+vd.envd, "NO_COLOR=1", "CI=1", "E2B_DEBUG=false")
		vitest(ctx, t, proj, venv, "tests/commands.test.mjs")
	})
}

// TestE2BBaseTemplate checks the sandbox E2B's "base" template gives, from
// the inside (through the native API, the envd face being another
// package's): user "user" (uid 1000) in /home/user with passwordless sudo,
// bash, python3, curl and git, and the create's envVars.
func TestE2BBaseTemplate(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	sb := e2bCreate(t, d, `{"templateID":"base","timeout":120,"envVars":{"GREETING":"hi"},"metadata":{"t":"base"}}`)
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

// e2bCreate creates a sandbox through the E2B face.
func e2bCreate(t *testing.T, d *daemon, body string) (sb struct{ SandboxID, TemplateID string }) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+d.addr+"/e2b/v2/sandboxes", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-KEY", "e2b_"+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(b, &sb); resp.StatusCode != http.StatusCreated || err != nil || sb.SandboxID == "" {
		t.Fatalf("create %s: %d %s", body, resp.StatusCode, b)
	}
	return sb
}

// TestE2BAutoResume: a sandbox created with E2B's autoPause pauses when
// its lifetime ends; with autoResume the next call on its insides resumes
// it with a fresh lifetime, without it that call is refused and it stays
// paused.
func TestE2BAutoResume(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx := context.Background()
	resumes := e2bCreate(t, d, `{"templateID":"base","timeout":2,"autoPause":true,"autoResume":{"enabled":true}}`).SandboxID
	viaEnvd := e2bCreate(t, d, `{"templateID":"base","timeout":2,"autoPause":true,"autoResume":{"enabled":true}}`).SandboxID
	stays := e2bCreate(t, d, `{"templateID":"base","timeout":2,"autoPause":true}`).SandboxID
	for _, id := range []string{resumes, viaEnvd, stays} {
		var sb *apiv1.Sandbox
		paused := poll(60*time.Second, func() bool {
			var err error
			if sb, err = d.client.Get(ctx, id); err != nil {
				t.Fatal(err)
			}
			return sb.State != "running"
		})
		if !paused || sb.State != "paused" {
			t.Fatalf("%s at the end of its lifetime: %s (%s), want paused", id, sb.State, sb.EndReason)
		}
		if !sb.PauseOnTimeout {
			t.Fatalf("%s: pause_on_timeout not set: %+v", id, sb)
		}
	}
	var out bytes.Buffer
	if res, err := d.client.Run(ctx, resumes, apiv1.ExecRequest{Cmd: []string{"echo", "back"}}, nil, &out, &out); err != nil || res.ExitCode != 0 || out.String() != "back\n" {
		t.Fatalf("exec in the auto-resuming sandbox: %v %+v %q", err, res, out.String())
	}
	sb, err := d.client.Get(ctx, resumes)
	if err != nil || sb.State != "running" || sb.ExpiresAt == nil || time.Until(*sb.ExpiresAt) <= 0 {
		t.Fatalf("after the call that resumed it: %+v %v", sb, err)
	}
	if _, err := d.client.Run(ctx, stays, apiv1.ExecRequest{Cmd: []string{"true"}}, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("exec in a paused sandbox without autoResume: %v", err)
	}
	// A call through the envd face (the SDK's commands) resumes it too;
	// without autoResume the face answers 502, as for a sandbox that is
	// gone, and the sandbox stays paused.
	c := newEnvd(t, d, viaEnvd, accessToken(t, d, viaEnvd), true)
	stream, err := c.proc.Start(ctx, connect.NewRequest(start("echo", "via envd")))
	if err != nil {
		t.Fatalf("envd start in the auto-resuming sandbox: %v", err)
	}
	if r := collect(stream, nil); r.err != nil || r.stdout.String() != "via envd\n" {
		t.Fatalf("envd start in the auto-resuming sandbox: %q %v", r.stdout.String(), r.err)
	}
	if sb, err := d.client.Get(ctx, viaEnvd); err != nil || sb.State != "running" {
		t.Fatalf("after the envd call that resumed it: %+v %v", sb, err)
	}
	c = newEnvd(t, d, stays, accessToken(t, d, stays), true)
	if st, body := c.do(t, "GET", nil, "", "", nil, nil); st != http.StatusBadGateway {
		t.Errorf("envd /files on a paused sandbox without autoResume: %d %s, want 502", st, body)
	}
	if sb, err := d.client.Get(ctx, stays); err != nil || sb.State != "paused" {
		t.Fatalf("without autoResume: %+v %v", sb, err)
	}
}
