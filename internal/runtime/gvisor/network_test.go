package gvisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"corral/internal/runtime"
	"corral/internal/testwait"
)

// ipCmd runs ip(8) for test setup only (the product uses netlink).
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// TestNetworkNamespace starts a sandbox in a namespace prepared the way the
// network layer does (a veth with an address and a route), and reaches a
// server in a second test namespace on the other end of the veth. Nothing
// touches the host's namespace.
func TestNetworkNamespace(t *testing.T) {
	r := newRuntime(t)
	tag := fmt.Sprintf("cgt%d", os.Getpid()%100000)
	sbNS, srvNS := tag+"-sb", tag+"-srv"
	ipCmd(t, "netns", "add", sbNS)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", sbNS).Run() })
	ipCmd(t, "netns", "add", srvNS)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", srvNS).Run() })
	ipCmd(t, "-n", sbNS, "link", "add", "eth0", "type", "veth", "peer", "name", "srv0", "netns", srvNS)
	ipCmd(t, "-n", sbNS, "addr", "add", "198.51.100.2/24", "dev", "eth0")
	ipCmd(t, "-n", sbNS, "link", "set", "eth0", "up")
	ipCmd(t, "-n", sbNS, "link", "set", "lo", "up")
	ipCmd(t, "-n", srvNS, "addr", "add", "198.51.100.1/24", "dev", "srv0")
	ipCmd(t, "-n", srvNS, "link", "set", "srv0", "up")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", srvNS, "python3", "-c",
		"import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('198.51.100.1',8080));s.listen(4)\n"+
			"while True:\n c,_=s.accept();c.recv(1024);c.sendall(b'HTTP/1.0 200 OK\\r\\n\\r\\nfrom-test-server\\n');c.close()")
	if err := srv.Start(); err != nil {
		t.Skipf("no python3 on the host for the test server: %v", err)
	}
	defer srv.Wait()
	defer cancel()

	ref := newRef()
	p := runtime.StartParams{Ref: ref, RootFS: env.rootfs, AgentBinary: env.agent, NetnsPath: "/run/netns/" + sbNS}
	sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer scancel()
	if err := r.Start(sctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Destroy(context.Background(), ref) })
	var out string
	reached := false
	defer func() {
		if !reached { // waitFor failed the test
			t.Logf("the last try said %q", out)
		}
	}()
	testwait.For(t, 30*time.Second, "the sandbox to reach the test server through its namespace", func() bool {
		out, _ = trySh(r, ref, "curl -sS --max-time 2 http://198.51.100.1:8080/", 10*time.Second)
		return strings.Contains(out, "from-test-server")
	})
	reached = true
	if got := sh(t, r, ref, "cat /proc/net/dev | grep -c eth0 || true"); strings.TrimSpace(got) != "1" {
		t.Errorf("sandbox does not see the namespace's eth0: %q", got)
	}
}
