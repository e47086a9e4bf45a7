package e2e

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// curl fetches url from inside sandbox id and returns the body, or "" when
// the connection failed (refused, reset, timed out, or not resolved).
func (d *daemon) curl(id string, args ...string) string {
	d.t.Helper()
	// A refusal comes at once (denied traffic is reset, not dropped); the
	// bound is for a TLS handshake through the proxy on a loaded host.
	out, errs, code := d.cli("", append([]string{"exec", id, "--", "curl", "-sS", "--max-time", "10"}, args...)...)
	if code != 0 {
		// Often what a test expects; logged for when it is not.
		d.t.Logf("curl %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errs))
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

// runtimes are the runtimes every network policy test runs against.
var runtimes = []string{"gvisor", "vm"}

func TestNetworkDefaultPolicy(t *testing.T) {
	t.Parallel()
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) { testNetworkDefaultPolicy(t, rt) })
	}
}

func testNetworkDefaultPolicy(t *testing.T, rt string) {
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	w := newWorld(t)
	d := startDaemon(t, "--dns-upstream", w.dnsAddr)
	id := d.create("--runtime", rt)
	other := d.create("--runtime", rt)
	if out := d.curl(id, "http://"+inetAddr+"/"); !strings.HasPrefix(out, "inet ") {
		t.Fatalf("default policy cannot reach the test internet: %q", out)
	}
	if out := d.curl(id, "http://allowed.test/"); !strings.HasPrefix(out, "inet allowed.test") {
		t.Errorf("name resolution through the daemon's resolver: %q", out)
	}
	if out := d.mustCLI("exec", id, "--", "cat", "/etc/resolv.conf"); !strings.Contains(out, "nameserver "+gatewayOf(t, d.sandboxAddr(id))) {
		t.Errorf("resolv.conf does not name the sandbox's gateway: %q", out)
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
	// The resolver and proxy listen on the wildcard address, but only
	// sandboxes reach them: not the host's own uplink address.
	for i, f := range d.net {
		if f == "--proxy-port" || f == "--dns-port" {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(hostAddr(t), d.net[i+1]), time.Second)
			if err == nil {
				c.Close()
				t.Errorf("%s %s reachable from outside the sandboxes", f, d.net[i+1])
			}
		}
	}
	// An allowed UDP flow, which the proxy never sees, is recorded too.
	d.mustCLI("exec", id, "--", "python3", "-c",
		"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('"+inetAddr+"', 9))")
	time.Sleep(300 * time.Millisecond) // decisions reach the log asynchronously
	events := d.mustCLI("events", id)
	for _, want := range []string{internalAddr, metadataAddr, "egress_denied", "egress_allowed", "allowed udp " + inetAddr + ":9"} {
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

func TestNetworkPolicies(t *testing.T) {
	t.Parallel()
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) { testNetworkPolicies(t, rt) })
	}
}

func testNetworkPolicies(t *testing.T, rt string) {
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	w := newWorld(t)
	d := startDaemon(t, "--dns-upstream", w.dnsAddr)

	t.Run("block", func(t *testing.T) {
		id := d.create("--runtime", rt, "--block-network")
		if out := d.curl(id, "http://"+inetAddr+"/"); out != "" {
			t.Errorf("block_network reached the internet: %q", out)
		}
		if out := d.curl(id, "http://allowed.test/"); out != "" {
			t.Errorf("block_network resolved and reached a name: %q", out)
		}
	})
	t.Run("cidr", func(t *testing.T) {
		id := d.create("--runtime", rt, "--cidr-allow", inetAddr+"/32")
		if out := d.curl(id, "http://"+inetAddr+"/"); !strings.HasPrefix(out, "inet") {
			t.Errorf("allowed range unreachable: %q", out)
		}
		if out := d.curl(id, "http://"+inetAddr2+"/"); out != "" {
			t.Errorf("range outside the allowlist reached: %q", out)
		}
	})
	t.Run("domain", func(t *testing.T) {
		id := d.create("--runtime", rt, "--domain-allow", "allowed.test")
		if out := d.curl(id, "http://allowed.test/"); !strings.HasPrefix(out, "inet allowed.test") {
			t.Fatalf("allowed.test unreachable: %q", out)
		}
		forged := map[string][]string{
			"denied name":                    {"http://denied.test/"},
			"denied.test's address directly": {"http://" + inetAddr2 + "/"},
			"allowed Host to denied address": {"-H", "Host: allowed.test", "http://" + inetAddr2 + "/"},
			"forged Host on allowed address": {"-H", "Host: denied.test", "http://" + inetAddr + "/"},
			"forged SNI to denied address":   {"-k", "--resolve", "allowed.test:443:" + inetAddr2, "https://allowed.test/"},
			"denied SNI on allowed address":  {"-k", "--resolve", "denied.test:443:" + inetAddr, "https://denied.test/"},
		}
		for name, args := range forged {
			t.Run(name, func(t *testing.T) {
				if out := d.curl(id, args...); out != "" {
					t.Errorf("got through: %q", out)
				}
			})
		}
		events := d.mustCLI("events", id)
		for _, want := range []string{"allowed.test", "denied.test", "egress_denied"} {
			if !strings.Contains(events, want) {
				t.Errorf("event log lacks %q:\n%s", want, events)
			}
		}
	})
	t.Run("live change", func(t *testing.T) {
		id := d.create("--runtime", rt)
		if out := d.curl(id, "http://"+inetAddr+"/"); out == "" {
			t.Fatal("default policy cannot reach the internet")
		}
		d.mustCLI("net", "set", id, "--block-network")
		if out := d.curl(id, "http://"+inetAddr+"/"); out != "" {
			t.Errorf("still reachable after net set --block-network: %q", out)
		}
		d.mustCLI("net", "set", id, "--cidr-allow", inetAddr2+"/32")
		if out := d.curl(id, "http://"+inetAddr2+"/"); out == "" {
			t.Error("unreachable after opening its range")
		}
		if out := d.curl(id, "http://"+inetAddr+"/"); out != "" {
			t.Errorf("reachable outside the new allowlist: %q", out)
		}
		if out := d.mustCLI("events", id); !strings.Contains(out, "network_policy") {
			t.Errorf("policy change not in the event log:\n%s", out)
		}
	})
}

// 20 sandboxes with networking created and removed leave no namespace,
// veth, nftables chain or set, state file or address behind.
func TestNetworkCreateRemoveLeavesNothing(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	var ids []string
	for i := 0; i < 20; i++ {
		id := d.create()
		d.mustCLI("rm", id)
		ids = append(ids, id)
	}
	d.assertNoLeaks(t, ids)
	if links := hostLinks(d.flag("--net-link-prefix")); len(links) > 0 {
		t.Errorf("sandbox veths left: %v", links)
	}
	if left := poolAddrs(d.flag("--net-pool")); len(left) > 0 {
		t.Errorf("sandbox addresses left:\n%s", strings.Join(left, "\n"))
	}
	if out, err := exec.Command("nft", "list", "table", "inet", d.flag("--net-table")).Output(); err == nil && strings.Contains(string(out), "chain sb") {
		t.Errorf("per-sandbox chains left:\n%s", out)
	}
	for _, dir := range []string{"net/netns", "net/slots"} {
		if ents, _ := os.ReadDir(filepath.Join(d.state, dir)); len(ents) > 0 {
			t.Errorf("%s not empty: %v", dir, ents)
		}
	}
}
