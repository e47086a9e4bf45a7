package daemon

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral/internal/cluster/node"
)

// TestListenPortZero: addresses given with port 0 get the bound port (the
// ports origin's default domain follows it), named hosts stay as given,
// and the ready file tells the bound addresses.
func TestListenPortZero(t *testing.T) {
	cfg := Config{Listen: "127.0.0.1:0", PortsListen: "127.0.0.1:0", EnvdListen: "127.0.0.1:0"}
	l, err := listen(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	for _, a := range []string{cfg.Listen, cfg.PortsListen, cfg.EnvdListen} {
		if strings.HasSuffix(a, ":0") {
			t.Fatalf("%q still has port 0", a)
		}
	}
	if !strings.HasPrefix(cfg.Listen, "127.0.0.1:") || cfg.Listen == cfg.PortsListen {
		t.Errorf("--listen %q, --ports-listen %q", cfg.Listen, cfg.PortsListen)
	}
	named := Config{Listen: "localhost:0"}
	nl, err := listen(&named)
	if err != nil {
		t.Fatal(err)
	}
	nl.close()
	if !strings.HasPrefix(named.Listen, "localhost:") || strings.HasSuffix(named.Listen, ":0") {
		t.Errorf("--listen's host changed or port not bound: %q", named.Listen)
	}
	if cfg.PortsDomain != "localhost:"+cfg.PortsListen[strings.LastIndex(cfg.PortsListen, ":")+1:] {
		t.Fatalf("ports domain %q", cfg.PortsDomain)
	}
	path := filepath.Join(t.TempDir(), "ready.json")
	if err := writeReady(path, cfg); err != nil {
		t.Fatal(err)
	}
	var r Ready
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &r); err != nil || r.Listen != cfg.Listen || r.PortsListen != cfg.PortsListen || r.PID != os.Getpid() {
		t.Fatalf("ready file %s: %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("ready file mode %v", fi.Mode())
	}
	c, err := net.Dial("tcp", r.PortsListen)
	if err != nil {
		t.Fatalf("the ports listener at %s: %v", r.PortsListen, err)
	}
	c.Close()
}

func TestListenRefuses(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, cfg := range []Config{
		{},
		{Listen: "127.0.0.1:0", EnvdListen: busy.Addr().String()},
	} {
		if l, err := listen(&cfg); err == nil {
			l.close()
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestNodeURLsBoundPort(t *testing.T) {
	cfg := Config{Listen: "127.0.0.1:0", EnvdListen: "127.0.0.1:0"}
	l, err := listen(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	c := node.Config{Address: "https://127.0.0.1:0", EnvdAddress: "https://node.example:0"}
	l.nodeURLs(&c)
	if c.Address != "https://"+cfg.Listen || c.EnvdAddress != "https://node.example:"+cfg.EnvdListen[strings.LastIndex(cfg.EnvdListen, ":")+1:] {
		t.Fatalf("%+v (listening on %s and %s)", c, cfg.Listen, cfg.EnvdListen)
	}
	fixed := node.Config{Address: "https://10.0.0.1:7070"}
	l.nodeURLs(&fixed)
	if fixed.Address != "https://10.0.0.1:7070" {
		t.Errorf("a fixed port changed: %s", fixed.Address)
	}
}
