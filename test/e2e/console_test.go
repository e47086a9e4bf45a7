package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestConsole drives the web console in Debian's chromium with Playwright
// (the npm project test/console-js): sign in (a wrong token refused),
// create from the form, a terminal that echoes, a denied connection in the
// timeline, upload and download, pause and resume, terminate. Screenshots
// go to the test's temp dir (CONSOLE_SHOTS names another). Then, without
// a browser: the session cookie's attributes and the CSRF and origin
// checks, and the PTY WebSocket with a bearer token.
func TestConsole(t *testing.T) {
	t.Parallel()
	npm, chromium, proj := browserProject(t)
	w := newWorld(t)
	logs := &lockedBuffer{}
	d := startDaemonTee(t, logs, "--dns-upstream", w.dnsAddr, "--metrics-interval", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	npmEnv := npmEnviron()
	npmCI(ctx, t, npm, proj, npmEnv)
	shots := os.Getenv("CONSOLE_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	t.Run("browser", func(t *testing.T) {
		run := exec.CommandContext(ctx, "node", "console.test.mjs")
		run.Dir = proj
		run.Env = append(npmEnv, "CORRAL_URL=http://"+d.addr, "CORRAL_TOKEN="+d.token, "CHROMIUM="+chromium, "OUT_DIR="+shots,
			"DENY_URL=http://"+internalAddr+"/")
		out, err := run.CombinedOutput()
		t.Logf("console.test.mjs (screenshots in %s):\n%s", shots, out)
		if err != nil {
			t.Fatalf("the browser test failed: %v (its output above)", err)
		}
		consoleRequests(t, filepath.Join(shots, "requests.json"))
		// The daemon's side: every request it logged meanwhile (the
		// browser's alone: this test sent none), the download among them.
		served := daemonRequests(t, logs.String())
		for r := range served {
			if !consolePath(r[strings.Index(r, " ")+1:]) {
				t.Errorf("the daemon served %s to the console", r)
			}
		}
		if len(served) == 0 || !served["GET /v1/sandboxes/{id}/files"] || !served["GET /v1/sandboxes/{id}/pty"] {
			t.Errorf("the daemon's log lacks the console's download or terminal: %v", served)
		}
	})
	t.Run("cookie and origin checks", func(t *testing.T) { consoleChecks(t, d) })
	t.Run("pty with a bearer token", func(t *testing.T) { consolePTY(ctx, t, d) })
}

// browserProject is npm, Debian's chromium and the browser tests' npm
// project (test/console-js), or a skip saying which is missing.
func browserProject(t *testing.T) (npm, chromium, proj string) {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("needs node and npm (the browser tests are an npm project)")
	}
	if chromium, err = exec.LookPath("chromium"); err != nil {
		t.Skip("needs Debian's chromium (scripts/deps.sh installs it)")
	}
	if proj, err = filepath.Abs("../console-js"); err != nil {
		t.Fatal(err)
	}
	return npm, chromium, proj
}

// consoleRequests lists what the page asked for: the public API, the
// console's page, assets and sign-in.
func consoleRequests(t *testing.T, file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []struct{ Method, URL string }
	if err := json.Unmarshal(b, &reqs); err != nil {
		t.Fatal(err)
	}
	paths := map[string]int{}
	for _, r := range reqs {
		u, err := url.Parse(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		p := u.Path
		if !consolePath(p) {
			t.Errorf("the console asked for %s %s, not a public API or console path", r.Method, r.URL)
		}
		paths[r.Method+" "+p]++
	}
	if len(reqs) == 0 || paths["POST /v1/sandboxes"] == 0 {
		t.Errorf("requests.json lists no create: %v", paths)
	}
	t.Logf("%d requests, %d distinct", len(reqs), len(paths))
}

// consolePath says whether p is the public API's (/v1/..., /metrics) or
// the console's own (its page, assets, sign-in and sign-out).
func consolePath(p string) bool {
	return strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/console/assets/") || p == "/" || p == "/metrics" ||
		p == "/console/login" || p == "/console/logout"
}

var sandboxID = regexp.MustCompile(`sb-[a-z0-9]+`)

// daemonRequests is the set of "METHOD path" (sandbox ids as {id}) the
// daemon's JSON log lines record as served.
func daemonRequests(t *testing.T, log string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		var l struct{ Msg, Method, Path string }
		if json.Unmarshal([]byte(strings.TrimSpace(line)), &l) != nil || l.Msg != "request" {
			continue
		}
		out[l.Method+" "+sandboxID.ReplaceAllString(l.Path, "{id}")] = true
	}
	t.Logf("the daemon served %d distinct requests", len(out))
	return out
}

// consoleChecks signs in over plain HTTP and tries what another site (or a
// script without the CSRF token) would.
func consoleChecks(t *testing.T, d *daemon) {
	base := "http://" + d.addr
	do := func(method, path, origin, csrf string, c *http.Client) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"token":"`+d.token+`"}`))
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if csrf != "" {
			req.Header.Set("X-Corral-CSRF", csrf)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	if r := do("POST", "/console/login", "http://evil.test", "", c); r.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in from another origin: %d, want 403", r.StatusCode)
	}
	r := do("POST", "/console/login", base, "", c)
	if r.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-in: %d", r.StatusCode)
	}
	csrf := ""
	for _, ck := range r.Cookies() {
		switch ck.Name {
		case "corral_session":
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Value == d.token {
				t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, not the token", ck)
			}
		case "corral_csrf":
			csrf = ck.Value
		}
	}
	if csrf == "" {
		t.Fatal("no CSRF cookie")
	}
	for _, c := range []struct {
		name, method, path, origin, csrf string
		client                           *http.Client
		want                             int
	}{
		{"no cookie", "GET", "/v1/sandboxes", "", "", http.DefaultClient, http.StatusUnauthorized},
		{"cookie, read", "GET", "/v1/sandboxes", "", "", c, http.StatusOK},
		{"forged origin", "POST", "/v1/sandboxes/nope/pause", "http://evil.test", csrf, c, http.StatusForbidden},
		{"no origin", "POST", "/v1/sandboxes/nope/pause", "", csrf, c, http.StatusForbidden},
		{"no CSRF header", "POST", "/v1/sandboxes/nope/pause", base, "", c, http.StatusForbidden},
		{"wrong CSRF header", "DELETE", "/v1/sandboxes/nope", base, "x" + csrf, c, http.StatusForbidden},
		{"all checks pass", "POST", "/v1/sandboxes/nope/pause", base, csrf, c, http.StatusNotFound},
	} {
		if r := do(c.method, c.path, c.origin, c.csrf, c.client); r.StatusCode != c.want {
			t.Errorf("%s: %s %s answered %d, want %d", c.name, c.method, c.path, r.StatusCode, c.want)
		}
	}
	page := do("GET", "/", "", "", http.DefaultClient)
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("the page's CSP: %q", csp)
	}
	if r := do("POST", "/console/logout", base, csrf, c); r.StatusCode != http.StatusNoContent {
		t.Errorf("sign-out: %d", r.StatusCode)
	}
	if r := do("GET", "/v1/sandboxes", "", "", c); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("after sign-out: %d, want 401", r.StatusCode)
	}
}

// consolePTY opens the terminal endpoint as a CLI would: a bearer token,
// no browser, no origin.
func consolePTY(ctx context.Context, t *testing.T, d *daemon) {
	id := d.create("--timeout", "5m")
	hdr := http.Header{"Authorization": {"Bearer " + d.token}}
	u := "ws://" + d.addr + "/v1/sandboxes/" + id + "/pty?cols=100&rows=30"
	if _, resp, err := websocket.Dial(ctx, u, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a PTY without a token: %v %v", resp, err)
	}
	if code, body := d.api("GET", "/v1/sandboxes/"+id+"/pty", d.token, ""); code != http.StatusBadRequest || !strings.Contains(body, "WebSocket") {
		t.Errorf("a PTY without a WebSocket handshake: %d %s", code, body)
	}
	if code, body := d.api("GET", "/v1/sandboxes/"+id+"/pty?cols=0", d.token, ""); code != http.StatusBadRequest {
		t.Errorf("a PTY of 0 columns: %d %s", code, body)
	}
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","cols":120,"rows":40}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageBinary, []byte("stty size; exit 7\n")); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("reading the PTY (so far %q): %v", out.String(), err)
		}
		if typ == websocket.MessageBinary {
			out.Write(b)
			continue
		}
		var m struct {
			Type     string `json:"type"`
			ExitCode *int   `json:"exit_code"`
		}
		if err := json.Unmarshal(b, &m); err != nil || m.Type != "exit" || m.ExitCode == nil || *m.ExitCode != 7 {
			t.Errorf("the PTY's last message: %s (%v)", b, err)
		}
		break
	}
	if !strings.Contains(out.String(), "40 120") {
		t.Errorf("stty size after a resize to 120x40: %q", out.String())
	}
}
