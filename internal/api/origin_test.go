package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParsePortsHost(t *testing.T) {
	for _, tt := range []struct {
		host, domain string
		id           string
		port         int
	}{
		{"8080-sb-abc123.localhost:7071", "localhost:7071", "sb-abc123", 8080},
		{"8080-SB-ABC123.Localhost", "localhost:7071", "sb-abc123", 8080},
		{"1-sb-x.ports.example.com", "ports.example.com", "sb-x", 1},
		{"65535-sb-x.example.com:443", "example.com", "sb-x", 65535},
	} {
		id, port, err := ParsePortsHost(tt.host, tt.domain)
		if err != nil || id != tt.id || port != tt.port {
			t.Errorf("ParsePortsHost(%q, %q) = %q, %d, %v; want %q, %d", tt.host, tt.domain, id, port, err, tt.id, tt.port)
		}
	}
	for _, host := range []string{
		"localhost:7071",               // the domain itself
		"sb-abc.localhost",             // no port
		"0-sb-abc.localhost",           // port 0
		"65536-sb-abc.localhost",       // too big
		"080-sb-abc.localhost",         // not canonical
		"+80-sb-abc.localhost",         // a sign
		"80-.localhost",                // no id
		"80-sb_abc.localhost",          // not an id
		"80-sb-abc.evil.localhost",     // two labels
		"80-sb-abc.localhost.evil.com", // another domain
		"80-sb-abc.notlocalhost",       // a suffix without the dot
		"",
	} {
		if id, port, err := ParsePortsHost(host, "localhost:7071"); err == nil {
			t.Errorf("ParsePortsHost(%q) = %q, %d; want an error", host, id, port)
		}
	}
}

// FuzzParsePortsHost: whatever Host a browser or attacker sends, a parse
// that succeeds names a port in range and an id of the id alphabet only,
// and the URL made from them parses back to the same.
func FuzzParsePortsHost(f *testing.F) {
	for _, s := range []string{"8080-sb-abc.localhost:7071", "1-a.localhost", "x", "80-sb-a.b.localhost", "99999999999999999999-a.localhost"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		id, port, err := ParsePortsHost(host, "localhost:7071")
		if err != nil {
			return
		}
		if port < 1 || port > 65535 || id == "" || strings.ContainsAny(id, "./:@ ") {
			t.Fatalf("ParsePortsHost(%q) = %q, %d", host, id, port)
		}
		u := PortsOrigin{Scheme: "http", Domain: "localhost:7071"}.URL(id, port, "/")
		h := strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/")
		id2, port2, err := ParsePortsHost(h, "localhost:7071")
		if err != nil || id2 != id || port2 != port {
			t.Fatalf("round trip of %q: %q -> %q, %d, %v", host, u, id2, port2, err)
		}
	})
}

func TestToOriginRedirectsBrowsers(t *testing.T) {
	s := &Server{ports: &PortsOrigin{Scheme: "http", Domain: "localhost:7071"}}
	r := httptest.NewRequest(http.MethodGet, "/v1/sandboxes/sb-a/ports/8080/app?x=1", nil)
	w := httptest.NewRecorder()
	s.toOrigin(w, r, "sb-a", 8080, "/app")
	if w.Code != http.StatusTemporaryRedirect || w.Header().Get("Location") != "http://8080-sb-a.localhost:7071/app?x=1" {
		t.Fatalf("got %d to %q", w.Code, w.Header().Get("Location"))
	}
}

func TestPortsOriginURL(t *testing.T) {
	got := PortsOrigin{Scheme: "https", Domain: "ports.example.com"}.URL("sb-a", 3000, "x")
	if want := "https://3000-sb-a.ports.example.com/x"; got != want {
		t.Fatalf("URL = %q, want %q", got, want)
	}
}
