package selftest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"corral/pkg/apiv1"
)

// headerLogger is a server for the attacker's exposed port 8080 that
// writes down every Cookie and Authorization header it is sent.
const headerLogger = `
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open("/tmp/origin-seen.log", "a") as f:
            for k in ("Cookie", "Authorization", "X-Corral-Port-Token"):
                for v in self.headers.get_all(k) or []:
                    f.write(k + ": " + v + "\n")
        self.send_response(200)
        self.send_header("Set-Cookie", "corral_session=planted; Path=/")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8080), H).serve_forever()
`

// leakConsoleOrigin: the attacker's page must never be served on the
// API's (the console's) origin to a browser, and no request may carry a
// Corral cookie or the caller's Authorization into the sandbox.
func leakConsoleOrigin(ctx context.Context, s *session) Result {
	tried := "serve a page on the attacker's exposed port; ask for it as a signed-in browser would (console cookie, Fetch Metadata) on the API's port path, " +
		"and by its ports-origin URL and the API path with a made-up console cookie and bearer token; see what the sandbox received"
	start := apiv1.ExecRequest{Cmd: []string{"sh", "-c", "setsid python3 -c '" + headerLogger + "' >/dev/null 2>&1 &"}}
	if _, err := s.c.Run(ctx, s.a.id, start, nil, io.Discard, io.Discard); err != nil {
		return inconclusive(tried, err)
	}
	// Both names: corral_session over plain HTTP, __Host-corral_session
	// over TLS.
	fake := "corral_session=" + s.nonce + "; corral_csrf=" + s.nonce + "; __Host-corral_session=" + s.nonce + "; __Host-corral_csrf=" + s.nonce + "; app=kept"
	apiPath := strings.TrimSuffix(s.c.BaseURL, "/") + "/v1/sandboxes/" + s.a.id + "/ports/8080/"
	browser := map[string]string{"Cookie": fake, "Sec-Fetch-Dest": "document", "Sec-Fetch-Mode": "navigate", "X-Corral-Port-Token": s.a.rec.PortToken}
	var status int
	var err error
	for i := 0; i < 50; i++ { // the server starts in the background
		if status, _, err = s.get(ctx, apiPath, "", map[string]string{"X-Corral-Port-Token": s.a.rec.PortToken}); err == nil && status == http.StatusOK {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status != http.StatusOK {
		return inconclusive(tried, fmt.Errorf("the attacker's page did not answer on the API path: %d %v", status, err))
	}
	asBrowser, _, err := s.get(ctx, apiPath, "", browser)
	if err != nil {
		return inconclusive(tried, err)
	}
	program, hdr, err := s.get(ctx, apiPath, "", map[string]string{"Authorization": "Bearer " + s.nonce, "X-Corral-Port-Token": s.a.rec.PortToken})
	if err != nil {
		return inconclusive(tried, err)
	}
	origin := "off"
	if len(s.a.rec.Ports) > 0 && s.a.rec.Ports[0].BrowserURL != "" {
		st, _, err := s.get(ctx, s.a.rec.Ports[0].BrowserURL, s.portsDial(s.a.rec.Ports[0].BrowserURL), map[string]string{"Cookie": fake,
			"Authorization": "Bearer " + s.nonce, "X-Corral-Port-Token": s.a.rec.PortToken})
		if err != nil {
			return inconclusive(tried, err)
		}
		origin = fmt.Sprint(st)
	}
	rc, _, err := s.c.ReadFile(ctx, s.a.id, "/tmp/origin-seen.log")
	if err != nil {
		return inconclusive(tried, err)
	}
	seen, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	rc.Close()
	leaked := strings.Contains(string(seen), s.nonce)
	ok := asBrowser != http.StatusOK && program == http.StatusOK && hdr.Get("Content-Security-Policy") == "sandbox" && hdr.Get("Set-Cookie") == "" &&
		!leaked && strings.Contains(string(seen), "app=kept") && (origin == "off" || origin == "200")
	return verdict(ok, tried, "a browser on the API path got %d (want a redirect or a refusal); a program got %d with Content-Security-Policy %q and Set-Cookie %q; "+
		"the ports origin answered %s; a Corral credential reached the sandbox: %t", asBrowser, program, hdr.Get("Content-Security-Policy"), hdr.Get("Set-Cookie"), origin, leaked)
}

// get sends a GET to u (through dial, a host:port, when not "") without
// following redirects, and returns the status and headers.
func (s *session) get(ctx context.Context, u, dial string, headers map[string]string) (int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	if dial != "" {
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, dial)
		}
	}
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, nil
}

// portsDial is where a ports-origin URL is reached from the host: a
// *.localhost name at the loopback address (as browsers resolve it),
// another name as it resolves.
func (s *session) portsDial(u string) string {
	p, err := url.Parse(u)
	if err != nil || !strings.HasSuffix(p.Hostname(), ".localhost") {
		return ""
	}
	port := p.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort("127.0.0.1", port)
}
