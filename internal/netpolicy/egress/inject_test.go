package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/secrets"
)

const realValue = "real-secret-value-7c1f"

// injectFixture is a proxy with one header rule (Authorization on
// allowed.test) in front of backend, which answers each request with the
// Authorization header it received.
type injectFixture struct {
	*fixture
	sandboxCA *x509.CertPool
	upstream  *x509.CertPool
	reports   chan Injection

	ruleMu sync.Mutex
	// rule says which ports and methods get the header; nil: every
	// method and port (a Headers that leaves the method to the proxy).
	rule *secrets.HeaderRule
}

// setRule replaces the fixture's rule (nil: any method and port).
func (f *injectFixture) setRule(r *secrets.HeaderRule) {
	f.ruleMu.Lock()
	defer f.ruleMu.Unlock()
	f.rule = r
}

// allows says whether the fixture's rule applies to port and method.
func (f *injectFixture) allows(port int, method string) bool {
	f.ruleMu.Lock()
	defer f.ruleMu.Unlock()
	return f.rule == nil || f.rule.Allows(port, method)
}

func newInjectFixture(t *testing.T, useTLS, trustUpstream bool) *injectFixture {
	t.Helper()
	now := time.Now()
	upCA, err := secrets.NewCA([]byte("upstream seed"), "upstream", now)
	if err != nil {
		t.Fatal(err)
	}
	sbCA, err := secrets.NewCA([]byte("sandbox seed"), "sb-1", now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "auth=%s host=%s", r.Header.Get("Authorization"), r.Host)
	}))
	if useTLS {
		leaf, err := upCA.Leaf("allowed.test")
		if err != nil {
			t.Fatal(err)
		}
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	f := &injectFixture{sandboxCA: pool(t, sbCA.PEM()), upstream: pool(t, upCA.PEM()), reports: make(chan Injection, 10),
		rule: &secrets.HeaderRule{Methods: []string{"GET"}}}
	f.fixture = newFixture(t, srv.Listener.Addr().String(), func(c *Config) {
		c.Intercept = func(id string) *Interception {
			if id != "sb-1" {
				return nil
			}
			return &Interception{
				Hosts: []string{"allowed.test"},
				Cert:  sbCA.Leaf,
				// The rule: GET on port 443 only, unless a test sets another.
				Headers: func(host string, port int, method string) ([]Header, error) {
					if !f.allows(port, method) {
						return nil, nil
					}
					return []Header{{Name: "Authorization", Value: "Bearer " + realValue}}, nil
				},
			}
		}
		c.Injected = func(i Injection) { f.reports <- i }
		if trustUpstream {
			c.UpstreamRoots = f.upstream
		}
	})
	return f
}

func pool(t *testing.T, pem string) *x509.CertPool {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM([]byte(pem)) {
		t.Fatal("bad PEM")
	}
	return p
}

// get sends requests (Host, Authorization) on one connection and returns
// the status and body of each.
func get(t *testing.T, c net.Conn, reqs ...[2]string) []string {
	t.Helper()
	return send(t, c, "GET", reqs...)
}

// send is get with another method.
func send(t *testing.T, c net.Conn, method string, reqs ...[2]string) []string {
	t.Helper()
	br := bufio.NewReader(c)
	var out []string
	for _, r := range reqs {
		fmt.Fprintf(c, "%s / HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Length: 0\r\n\r\n", method, r[0], r[1])
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b))))
	}
	return out
}

func TestInjectHTTPS(t *testing.T) {
	f := newInjectFixture(t, true, true)
	c := f.dial(allowedAddr.String() + ":443")
	// The sandbox trusts its own CA only: the handshake shows the
	// connection was terminated by the proxy.
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: f.sandboxCA})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake with the sandbox's CA: %v", err)
	}
	got := get(t, tc, [2]string{"allowed.test", "placeholder"}, [2]string{"other.test", "x"})
	if want := "200 auth=Bearer " + realValue + " host=allowed.test"; got[0] != want {
		t.Errorf("first request: %q, want %q", got[0], want)
	}
	if !strings.HasPrefix(got[1], "421 ") || strings.Contains(got[1], realValue) {
		t.Errorf("request for another host on the connection: %q, want 421", got[1])
	}
	select {
	case r := <-f.reports:
		if r.Host != "allowed.test" || len(r.Headers) != 1 || r.Headers[0] != "Authorization" || r.Err != "" {
			t.Errorf("report %+v", r)
		}
		if strings.Contains(fmt.Sprint(r), realValue) {
			t.Error("the report holds the value")
		}
	case <-time.After(5 * time.Second):
		t.Error("no injection report")
	}
}

func TestInjectNotNamedIsSpliced(t *testing.T) {
	f := newInjectFixture(t, true, true)
	// denied.test resolves to deniedAddr; no rule names it. The client
	// sees the real server's certificate and its own header arrives.
	c := f.dial(deniedAddr.String() + ":443")
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: f.upstream})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake with the upstream's CA: %v", err)
	}
	got := get(t, tc, [2]string{"allowed.test", "mine"})
	if want := "200 auth=mine host=allowed.test"; got[0] != want {
		t.Errorf("got %q, want %q", got[0], want)
	}
}

func TestInjectUpstreamVerified(t *testing.T) {
	f := newInjectFixture(t, true, false) // upstream's CA not trusted
	c := f.dial(allowedAddr.String() + ":443")
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: f.sandboxCA})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	got := get(t, tc, [2]string{"allowed.test", "x"})
	if !strings.HasPrefix(got[0], "502 ") {
		t.Errorf("untrusted upstream: %q, want 502", got[0])
	}
}

// TestInjectHTTPNever: plain HTTP to a ruled host is spliced untouched:
// the secret never goes in clear text, the sandbox's own header goes
// through, and the skip is reported.
func TestInjectHTTPNever(t *testing.T) {
	f := newInjectFixture(t, false, false)
	c := f.dial(allowedAddr.String() + ":80")
	got := get(t, c, [2]string{"allowed.test", "placeholder"}, [2]string{"allowed.test:80", "again"})
	for i, g := range got {
		if strings.Contains(g, realValue) || !strings.HasPrefix(g, "200 auth=") {
			t.Errorf("request %d over plain HTTP: %q, want the sandbox's own header", i, g)
		}
	}
	select {
	case r := <-f.reports:
		if r.Skipped == "" || !strings.Contains(r.Skipped, "plain HTTP") || len(r.Headers) != 0 {
			t.Errorf("report %+v, want a skip for plain HTTP", r)
		}
	case <-time.After(5 * time.Second):
		t.Error("no report of the skip")
	}
}

// tlsTo opens a TLS connection from the sandbox to allowed.test on port,
// trusting the sandbox's CA (so it is intercepted).
func (f *injectFixture) tlsTo(t *testing.T, port string) net.Conn {
	t.Helper()
	tc := tls.Client(f.dial(allowedAddr.String()+":"+port), &tls.Config{ServerName: "allowed.test", RootCAs: f.sandboxCA})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake on port %s: %v", port, err)
	}
	return tc
}

// TestInjectScope: over TLS, a method or port the rule does not allow
// goes upstream without the secret (the sandbox's own header kept); a
// rule naming no method allows the ordinary ones only.
func TestInjectScope(t *testing.T) {
	f := newInjectFixture(t, true, true)
	tlsTo := func(port string) net.Conn { return f.tlsTo(t, port) }
	if got := send(t, tlsTo("443"), "POST", [2]string{"allowed.test", "mine"}); got[0] != "200 auth=mine host=allowed.test" {
		t.Errorf("POST, which the rule does not allow: %q", got[0])
	}
	if got := get(t, tlsTo("8443"), [2]string{"allowed.test", "mine"}); got[0] != "200 auth=mine host=allowed.test" {
		t.Errorf("GET on port 8443, which the rule does not allow: %q", got[0])
	}
	if got := get(t, tlsTo("443"), [2]string{"allowed.test", "mine"}); got[0] != "200 auth=Bearer "+realValue+" host=allowed.test" {
		t.Errorf("GET on 443: %q, want the secret", got[0])
	}
	// The default methods: the ordinary ones, not TRACE nor one unknown.
	f.setRule(&secrets.HeaderRule{})
	for _, c := range []struct {
		method string
		secret bool
	}{{"POST", true}, {"DELETE", true}, {"OPTIONS", true}, {"PROPFIND", false}, {"TRACE", false}} {
		got := send(t, tlsTo("443"), c.method, [2]string{"allowed.test", "mine"})[0]
		if c.secret != strings.Contains(got, realValue) {
			t.Errorf("%s with a rule naming no method: %q, want the secret %t", c.method, got, c.secret)
		}
	}
}

// TestInjectNeverEcho: a TRACE or TRACK (any case) never gets the
// header, even from a rule that would allow every method (one stored
// before such rules were refused), and the skip says why.
func TestInjectNeverEcho(t *testing.T) {
	f := newInjectFixture(t, true, true)
	f.setRule(nil)
	if got := get(t, f.tlsTo(t, "443"), [2]string{"allowed.test", "mine"})[0]; got != "200 auth=Bearer "+realValue+" host=allowed.test" {
		t.Fatalf("GET with a rule allowing any method: %q, want the secret", got)
	}
	<-f.reports
	for _, m := range []string{"TRACE", "trace", "TRACK"} {
		if got := send(t, f.tlsTo(t, "443"), m, [2]string{"allowed.test", "mine"})[0]; got != "200 auth=mine host=allowed.test" {
			t.Errorf("%s: %q, want the sandbox's own header and never the secret", m, got)
		}
	}
	select {
	case r := <-f.reports:
		if len(r.Headers) != 0 || !strings.Contains(r.Skipped, "TRACE") || !strings.Contains(r.Skipped, "never") {
			t.Errorf("report %+v, want a skip naming TRACE and why", r)
		}
	case <-time.After(5 * time.Second):
		t.Error("no report of the skip")
	}
	for m, want := range map[string]bool{"TRACE": true, "Track": true, "CONNECT": true, "GET": false, "POST": false, "PROPFIND": false} {
		if _, never := neverInjected(m); never != want {
			t.Errorf("neverInjected(%s) = %t", m, never)
		}
	}
}
