package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPortsOriginBrowser: an operator signed in to the web console (in
// Debian's chromium, driven by test/console-js/origin.test.mjs) opens a
// hostile page that a sandbox serves on a public exposed port, by its URL
// on the ports origin and by the API's port path. The page gets none of
// Corral's cookies and cannot list, create, run or open a terminal with
// the operator's session; the sandbox's server never sees a Corral cookie
// or Authorization header; the cookie it tries to plant does not replace
// the console's session.
func TestPortsOriginBrowser(t *testing.T) {
	t.Parallel()
	npm, chromium, proj := browserProject(t)
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	npmEnv := npmEnviron()
	npmCI(ctx, t, npm, proj, npmEnv)

	victim := d.create()
	id := d.create("--expose-public", "8000")
	d.mustCLI("fs", "put", id, "testdata/hostile_port.py", "/srv/hostile.py")
	d.mustCLI("exec", "-d", id, "--", "python3", "/srv/hostile.py", "8000")
	pageURL := strings.TrimSpace(d.mustCLI("url", id, "8000"))
	if want := "http://8000-" + id + "." + d.portsDomain() + "/"; pageURL != want {
		t.Fatalf("corral url = %q, want %q", pageURL, want)
	}
	waitServing(t, d, id)

	out := t.TempDir()
	run := exec.CommandContext(ctx, "node", "origin.test.mjs")
	run.Dir = proj
	run.Env = append(npmEnv, "CORRAL_URL=http://"+d.addr, "CORRAL_TOKEN="+d.token, "CHROMIUM="+chromium, "OUT_DIR="+out,
		"PAGE_URL="+pageURL, "API_PAGE_URL=http://"+d.addr+"/v1/sandboxes/"+id+"/ports/8000/", "VICTIM="+victim)
	b, err := run.CombinedOutput()
	t.Logf("origin.test.mjs:\n%s", b)
	if err != nil {
		t.Errorf("the browser test failed: %v (its output above)", err)
	}

	var runs map[string]struct {
		Origin   string `json:"origin"`
		Cookie   string `json:"cookie"`
		FinalURL string `json:"final_url"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "origin.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &runs); err != nil {
		t.Fatalf("origin.json: %v\n%s", err, raw)
	}
	wantOrigin := "http://8000-" + id + "." + d.portsDomain()
	for _, name := range []string{"ports origin", "api path"} {
		r, ok := runs[name]
		if !ok {
			t.Errorf("no report of the page opened by the %s", name)
			continue
		}
		if r.Origin != wantOrigin || !strings.HasPrefix(r.FinalURL, wantOrigin+"/") {
			t.Errorf("by the %s the page ran at %s (%s), want the ports origin %s", name, r.Origin, r.FinalURL, wantOrigin)
		}
	}
	// What the sandbox's server saw: requests, and no credential of Corral's.
	seen := d.mustCLI("exec", id, "--", "cat", "/tmp/headers.log")
	if !strings.Contains(seen, "POST /report seen") {
		t.Errorf("the sandbox's server got no report:\n%s", seen)
	}
	for _, line := range strings.Split(seen, "\n") {
		if strings.Contains(line, "corral_") || strings.Contains(line, "Authorization:") || strings.Contains(line, "X-Corral-Port-Token:") {
			t.Errorf("a Corral credential reached the sandbox: %s", line)
		}
	}
}

// waitServing waits until port 8000 of sandbox id answers through the API.
func waitServing(t *testing.T, d *daemon, id string) {
	t.Helper()
	var stderr string
	var code int
	if !poll(15*time.Second, func() bool {
		_, stderr, code = d.cli("", "exec", id, "--", "python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/')")
		return code == 0
	}) {
		t.Fatalf("the page's server does not answer: exit %d\n%s", code, stderr)
	}
}
