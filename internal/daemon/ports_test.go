package daemon

import (
	"log/slog"
	"strings"
	"testing"
)

func TestPortsDefaults(t *testing.T) {
	for _, tt := range []struct {
		listen, domain, api string
		want, err           string
	}{
		{"127.0.0.1:7071", "", "127.0.0.1:7070", "localhost:7071", ""},
		{"0.0.0.0:443", "ports.example.com", "127.0.0.1:7070", "ports.example.com", ""},
		{"", "", "127.0.0.1:7070", "", ""},
		{"", "x.com", "127.0.0.1:7070", "", "needs --ports-listen"},
		{"127.0.0.1:7070", "", "127.0.0.1:7070", "", "the API's --listen"},
		{"127.0.0.1:0", "", "127.0.0.1:7070", "", ""}, // the domain follows the port listen binds
		{"127.0.0.1:7071", "10.0.0.1", "127.0.0.1:7070", "", "not an address"},
		{"127.0.0.1:7071", "http://x.com", "127.0.0.1:7070", "", "not a TCP port"},
		{"127.0.0.1:7071", "x.com/path", "127.0.0.1:7070", "", "not a DNS label"},
		{"127.0.0.1:7071", "x.com:99999", "127.0.0.1:7070", "", "not a TCP port"},
		{"nonsense", "", "127.0.0.1:7070", "", "--ports-listen"},
	} {
		cfg := Config{PortsListen: tt.listen, PortsDomain: tt.domain, Listen: tt.api}
		err := cfg.portsDefaults()
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q %q: err %v, want %q", tt.listen, tt.domain, err, tt.err)
			}
			continue
		}
		if err != nil || cfg.PortsDomain != tt.want {
			t.Errorf("%q %q: %q, %v; want %q", tt.listen, tt.domain, cfg.PortsDomain, err, tt.want)
		}
	}
}

func TestSharedParent(t *testing.T) {
	for _, tt := range []struct {
		console, ports, want string
	}{
		{"corral.example.com", "ports.example.com", "example.com"},
		{"corral.example.com", "example.com", "example.com"},
		{"example.com", "ports.example.com:8443", "example.com"},
		{"Corral.Example.COM.:443", "ports.example.com", "example.com"},
		{"ports.example.com:7070", "ports.example.com:7071", "example.com"},
		{"corral.example.co.uk", "ports.example.co.uk", "example.co.uk"},
		{"corral.example.com", "example-ports.com", ""},
		{"corral.example.co.uk", "ports.other.co.uk", ""},
		// A public suffix (here github.io, a private one browsers honour)
		// is no parent a cookie can be set on.
		{"me.github.io", "ports.github.io", ""},
		{"corral.example.com", "github.io", ""},
		{"localhost", "localhost:7071", ""},
		{"127.0.0.1", "localhost:7071", ""},
		{"[::1]:7070", "localhost:7071", ""},
		{"10.0.0.5", "ports.example.com", ""},
		{"corral", "ports.example.com", ""},
		{"", "ports.example.com", ""},
	} {
		if got := sharedParent(tt.console, tt.ports); got != tt.want {
			t.Errorf("sharedParent(%q, %q) = %q, want %q", tt.console, tt.ports, got, tt.want)
		}
	}
}

func TestPortsParent(t *testing.T) {
	for _, tt := range []struct {
		listen, domain string
		console        []string
		ok             bool
		err, warn      string
	}{
		{"127.0.0.1:7070", "", nil, false, "", ""},
		{"localhost:7070", "", nil, false, "", ""},
		{"0.0.0.0:7070", "ports.example.com", []string{"corral.example.net"}, false, "", ""},
		{"corral.example.com:7070", "ports.example.com", nil, false, "share the registrable domain example.com", ""},
		{"0.0.0.0:7070", "ports.example.com", []string{"corral.example.net", "corral.example.com"}, false,
			"--ports-domain ports.example.com and the console's host corral.example.com share the registrable domain example.com", ""},
		{"0.0.0.0:7070", "example.com:8443", []string{"corral.example.com"}, true, "", "shared_domain=example.com"},
		{"0.0.0.0:7070", "ports.example.com", []string{"https://corral.example.com/"}, false, "want a host name", ""},
	} {
		var logs strings.Builder
		cfg := Config{Listen: tt.listen, PortsListen: "0.0.0.0:7071", PortsDomain: tt.domain, ConsoleHosts: tt.console, PortsSharedParentOK: tt.ok,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		err := cfg.portsDefaults()
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s %q %v: %v", tt.listen, tt.domain, tt.console, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s %q %v: %v, want %q", tt.listen, tt.domain, tt.console, err, tt.err)
		case tt.err != "" && !strings.Contains(err.Error(), "--ports-domain-shared-parent-ok") && !strings.Contains(tt.err, "host name"):
			t.Errorf("the refusal does not say how to override it: %v", err)
		}
		if (tt.warn == "") != (logs.Len() == 0) || !strings.Contains(logs.String(), tt.warn) || tt.warn != "" && !strings.Contains(logs.String(), "level=WARN") {
			t.Errorf("%s %q %v: log %q, want a warning with %q", tt.listen, tt.domain, tt.console, logs.String(), tt.warn)
		}
	}
}
