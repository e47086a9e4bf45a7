package console

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"corral/internal/websession"
)

func server(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(websession.New("tok"), "v-test", slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestPage: the page carries a fresh nonce that its CSP names, and every
// script and stylesheet it loads is embedded.
func TestPage(t *testing.T) {
	srv := server(t)
	resp, body := get(t, srv.URL+"/")
	csp := resp.Header.Get("Content-Security-Policy")
	m := regexp.MustCompile(`<meta name="csp-nonce" content="([^"]+)">`).FindStringSubmatch(body)
	if m == nil || !strings.Contains(csp, "'nonce-"+m[1]+"'") || !strings.HasPrefix(csp, "default-src 'self';") {
		t.Fatalf("CSP %q does not name the page's nonce (%v)", csp, m)
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP allows inline code: %q", csp)
	}
	if _, again := get(t, srv.URL+"/"); strings.Contains(again, m[1]) {
		t.Error("the nonce is the same on two loads")
	}
	for _, h := range []string{"X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("no %s", h)
		}
	}
	refs := regexp.MustCompile(`(?:src|href)="(/console/assets/[^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(refs) < 5 {
		t.Fatalf("the page loads %d assets", len(refs))
	}
	for _, r := range refs {
		if resp, _ := get(t, srv.URL+r[1]); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: %d", r[1], resp.StatusCode)
		}
	}
}

func TestLoginRefusals(t *testing.T) {
	srv := server(t)
	for _, c := range []struct {
		name, body, origin, ctype string
		want                      int
		msg                       string
	}{
		{"wrong token", `{"token":"nope"}`, srv.URL, "application/json", 401, "not this daemon's API token"},
		{"bad JSON", `{"token":`, srv.URL, "application/json", 400, "body"},
		{"another site", `{"token":"tok"}`, "http://evil.test", "application/json", 403, "cross-origin"},
		{"form", `token=tok`, srv.URL, "application/x-www-form-urlencoded", 204, ""},
		{"json", `{"token":"tok"}`, srv.URL, "application/json", 204, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/console/login", strings.NewReader(c.body))
			req.Header.Set("Content-Type", c.ctype)
			req.Header.Set("Origin", c.origin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want || !strings.Contains(string(b), c.msg) {
				t.Errorf("%d %s, want %d with %q", resp.StatusCode, b, c.want, c.msg)
			}
		})
	}
	if resp, body := get(t, srv.URL+"/console/nothing"); resp.StatusCode != 404 || !strings.Contains(body, `"not_found"`) {
		t.Errorf("an unknown console path: %d %s", resp.StatusCode, body)
	}
}
