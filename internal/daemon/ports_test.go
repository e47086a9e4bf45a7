package daemon

import (
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
		{"127.0.0.1:0", "", "127.0.0.1:7070", "", "no fixed port"},
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
