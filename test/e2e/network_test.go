package e2e

import (
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// curl fetches url from inside sandbox id and returns the body, or "" when
// the connection failed (refused, reset, timed out, or not resolved).
func (d *daemon) curl(id string, args ...string) string {
	d.t.Helper()
	out, _, code := d.cli("", append([]string{"exec", id, "--", "curl", "-sS", "--max-time", "4"}, args...)...)
	if code != 0 {
		return ""
	}
	return out
}

// hostAddr is the host's own address on its uplink (not loopback).
func hostAddr(t *testing.T) string {
	out, err := exec.Command("ip", "-4", "-o", "route", "get", "198.18.0.1").Output()
	if err != nil {
		t.Skipf("no uplink route: %v", err)
	}
	f := strings.Fields(string(out))
	for i := range f {
		if f[i] == "src" && i+1 < len(f) {
			return f[i+1]
		}
	}
	t.Skip("no uplink source address")
	return ""
}

func TestNetworkDefaultPolicy(t *testing.T) {
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	w := newWorld(t)
	d := startDaemon(t, "--dns-upstream", w.dnsAddr)
	id := d.create()
	other := d.create()
	if out := d.curl(id, "http://"+inetAddr+"/"); !strings.HasPrefix(out, "inet ") {
		t.Fatalf("default policy cannot reach the test internet: %q", out)
	}
	if out := d.curl(id, "http://allowed.test/"); !strings.HasPrefix(out, "inet allowed.test") {
		t.Errorf("name resolution through the daemon's resolver: %q", out)
	}
	// A listener on every host address: the sandbox must reach none of them.
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nhost-service\n"))
			c.Close()
		}
	}()
	hostPort := l.Addr().(*net.TCPAddr).Port
	otherIP := d.sandboxAddr(other)
	d.mustCLI("exec", "-d", other, "--", "python3", "-m", "http.server", "8080")
	gw := gatewayOf(t, d.sandboxAddr(id))
	denied := map[string]string{
		"internal 10.x host":   "http://" + internalAddr + "/",
		"metadata":             "http://" + metadataAddr + "/",
		"host uplink address":  "http://" + hostAddr(t) + ":" + strconv.Itoa(hostPort) + "/",
		"daemon API (gateway)": "http://" + gw + ":" + d.addr[strings.LastIndex(d.addr, ":")+1:] + "/v1/health",
		"host service on gw":   "http://" + gw + ":" + strconv.Itoa(hostPort) + "/",
		"another sandbox":      "http://" + otherIP + ":8080/",
	}
	for name, url := range denied {
		t.Run(name, func(t *testing.T) {
			if out := d.curl(id, url); out != "" {
				t.Errorf("reached %s (%s): %q", name, url, out)
			}
		})
	}
	events := d.mustCLI("events", id)
	for _, want := range []string{internalAddr, metadataAddr, "egress_denied", "egress_allowed"} {
		if !strings.Contains(events, want) {
			t.Errorf("event log lacks %q:\n%s", want, events)
		}
	}
}

// sandboxAddr is the sandbox's own IPv4 address (a UDP connect sends nothing).
func (d *daemon) sandboxAddr(id string) string {
	d.t.Helper()
	return strings.TrimSpace(d.mustCLI("exec", id, "--", "python3", "-c",
		"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('"+inetAddr+"', 9)); print(s.getsockname()[0])"))
}

// gatewayOf is the host side of a sandbox's /30: its address minus one.
func gatewayOf(t *testing.T, addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		t.Fatalf("sandbox address %q: %v", addr, err)
	}
	b := a.As4()
	b[3]--
	return netip.AddrFrom4(b).String()
}
