package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"
)

// upgradeEcho answers an HTTP Upgrade with 101, then echoes lines upper-cased:
// enough to prove the proxy carries upgraded (WebSocket-style) connections.
const upgradeEcho = `
import socket, threading
def serve(c):
    f = c.makefile('rwb')
    while f.readline() not in (b'\r\n', b''): pass
    f.write(b'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n'); f.flush()
    for line in f:
        f.write(line.upper()); f.flush()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 9000)); s.listen(8)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,)).start()
`

func TestExposedPorts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create("--expose", "8000", "--expose", "9000", "--expose-public", "8001")
	d.mustCLI("exec", id, "--", "sh", "-c", "mkdir -p /srv && echo hello-from-sandbox > /srv/index.html")
	d.mustCLI("exec", "-d", id, "--", "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/srv")
	d.mustCLI("exec", "-d", id, "--", "python3", "-m", "http.server", "8001", "--directory", "/srv")
	d.mustCLI("exec", "-d", id, "--", "python3", "-c", upgradeEcho)
	url := strings.TrimSpace(d.mustCLI("url", id, "8000"))
	base := "http://" + d.addr + "/v1/sandboxes/" + id + "/ports/"

	origin := originClient(t, d)
	get := func(u string, hdr map[string]string) (int, string) {
		for i := 0; ; i++ {
			req, _ := http.NewRequest("GET", u, nil)
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := origin.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTemporaryRedirect {
				b = []byte(resp.Header.Get("Location"))
			}
			// The servers start in the background: retry while nothing listens.
			if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "nothing listens") && i < 50 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return resp.StatusCode, string(b)
		}
	}
	if !strings.HasPrefix(url, "http://8000-"+id+".localhost:") {
		t.Fatalf("corral url gave %q, not the ports origin", url)
	}
	token := url[strings.Index(url, "corral_token=")+len("corral_token="):]
	pub := "http://8001-" + id + "." + d.portsDomain()
	// In order: the origin's cookie is kept from the URL with a token on.
	tests := []struct {
		name   string
		url    string
		hdr    map[string]string
		status int
		body   string
	}{
		{"origin, no token", "http://8000-" + id + "." + d.portsDomain() + "/", nil, 401, "token"},
		{"url with token (a program)", url + "&x=1", nil, 200, "hello-from-sandbox"},
		{"url with token (a browser, then its cookie)", url + "&x=1", map[string]string{"Sec-Fetch-Mode": "navigate"}, 200, "hello-from-sandbox"},
		{"origin, the cookie", "http://8000-" + id + "." + d.portsDomain() + "/index.html", nil, 200, "hello-from-sandbox"},
		{"origin, header token", "http://8000-" + id + "." + d.portsDomain() + "/index.html", map[string]string{"X-Corral-Port-Token": token}, 200, "hello-from-sandbox"},
		{"origin, public port", pub + "/index.html", nil, 200, "hello-from-sandbox"},
		{"origin, another domain", "http://8001-" + id + ".example.com/", nil, 400, "Host"},
		{"api path, a browser's navigation", base + "8001/index.html", map[string]string{"Sec-Fetch-Dest": "document", "Sec-Fetch-Mode": "navigate"}, 307, pub + "/index.html"},
		{"api path, the console's cookie", base + "8001/index.html", map[string]string{"Cookie": "corral_session=x"}, 307, pub + "/index.html"},
		{"header token", base + "8000/index.html", map[string]string{"X-Corral-Port-Token": token}, 200, "hello-from-sandbox"},
		{"api token", base + "8000/index.html", map[string]string{"Authorization": "Bearer " + d.token}, 200, "hello-from-sandbox"},
		{"no token", base + "8000/", nil, 401, "token"},
		{"wrong token", base + "8000/", map[string]string{"X-Corral-Port-Token": "nope"}, 401, "token"},
		{"public port", base + "8001/index.html", nil, 200, "hello-from-sandbox"},
		{"not exposed", base + "8002/", map[string]string{"Authorization": "Bearer " + d.token}, 404, "not exposed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := get(tt.url, tt.hdr)
			if status != tt.status || !strings.Contains(body, tt.body) {
				t.Errorf("status %d body %q; want %d containing %q", status, body, tt.status, tt.body)
			}
		})
	}
	t.Run("api path answers programs in a sandbox of its own", func(t *testing.T) {
		resp, err := http.Get(base + "8001/index.html")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != "sandbox" {
			t.Errorf("status %d, Content-Security-Policy %q; want 200 and sandbox", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
		}
	})

	t.Run("upgrade through the proxy", func(t *testing.T) {
		var conn net.Conn
		var br *bufio.Reader
		for i := 0; i < 50; i++ {
			c, err := net.Dial("tcp", d.addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "GET /v1/sandboxes/"+id+"/ports/9000/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\nX-Corral-Port-Token: "+token+"\r\n\r\n")
			br = bufio.NewReader(c)
			line, _ := br.ReadString('\n')
			if strings.Contains(line, "101") {
				conn = c
				break
			}
			c.Close()
			time.Sleep(100 * time.Millisecond)
		}
		if conn == nil {
			t.Fatal("no 101 from the upgrade server through the proxy")
		}
		defer conn.Close()
		for l, _ := br.ReadString('\n'); l != "\r\n" && l != ""; l, _ = br.ReadString('\n') {
		}
		io.WriteString(conn, "ping\n")
		if got, _ := br.ReadString('\n'); got != "PING\n" {
			t.Errorf("echo over the upgraded connection: %q", got)
		}
	})

	t.Run("raw tcp tunnel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := d.client.Tunnel(ctx, id, 9000)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\n\r\nraw\n")
		br := bufio.NewReader(c)
		for l, _ := br.ReadString('\n'); l != "\r\n" && l != ""; l, _ = br.ReadString('\n') {
		}
		if got, _ := br.ReadString('\n'); got != "RAW\n" {
			t.Errorf("echo over the tunnel: %q", got)
		}
	})

	// An HTTP/1.0 exchange over the tunnel ends when the server closes,
	// whether or not the caller half-closed after its request.
	for _, halfClose := range []bool{false, true} {
		t.Run(fmt.Sprintf("tunnel ends with the server, caller half-closed %v", halfClose), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := d.client.Tunnel(ctx, id, 8000)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			io.WriteString(c, "GET /index.html HTTP/1.0\r\n\r\n")
			if halfClose {
				if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			got, err := io.ReadAll(c)
			if err != nil || !strings.Contains(string(got), "hello-from-sandbox") {
				t.Errorf("read to the server's close: %v, %q", err, got)
			}
		})
	}

	if out := d.mustCLI("events", id); !strings.Contains(out, "port_connection") {
		t.Errorf("exposed-port connections missing from the event log:\n%s", out)
	}
}

// originClient is an HTTP client for d's ports origin as a browser uses
// it: every name reaches d's --ports-listen (as Chromium resolves
// *.localhost to loopback; a name is never looked up), an address (the
// daemon's API) is dialled as it is, cookies are kept, and the
// 303 that trades ?corral_token= for the origin's cookie is followed while
// a 307 (the API path sending a browser to the origin) is returned.
func originClient(t *testing.T, d *daemon) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := d.flag("--ports-listen")
	return &http.Client{
		Jar: jar,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, host string) (net.Conn, error) {
			if h, _, _ := net.SplitHostPort(host); net.ParseIP(h) == nil {
				host = addr // a name: the ports origin's
			}
			return (&net.Dialer{}).DialContext(ctx, network, host)
		}},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.Response != nil && req.Response.StatusCode == http.StatusTemporaryRedirect {
				return http.ErrUseLastResponse
			}
			return nil
		},
		Timeout: 30 * time.Second,
	}
}

// portsDomain is d's --ports-domain: localhost and its ports listener's port.
func (d *daemon) portsDomain() string {
	a := d.flag("--ports-listen")
	return "localhost" + a[strings.LastIndex(a, ":"):]
}
