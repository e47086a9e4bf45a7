package agent

import (
	"io"
	"net"
	"testing"
	"time"

	"corral/internal/agentapi"
)

// A volume's relay carries only connections from a privileged port (the
// guest kernel's NFS client): an unprivileged process is cut off before
// anything reaches the daemon.
func TestVolumeRelayPrivilegedPortsOnly(t *testing.T) {
	requireRoot(t) // binds a port below 1024, as the kernel's client does
	env := newEnv(t, "")
	ctx := testCtx(t)
	rel, err := env.srv.nfs.relay(3)
	if err != nil {
		t.Fatal(err)
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: rel.port()}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := env.c.AcceptVolumeNFS(ctx, 3)
		if err != nil {
			t.Error(err)
			close(accepted)
			return
		}
		accepted <- c
	}()

	unpriv, err := net.DialTCP("tcp4", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer unpriv.Close()
	_ = unpriv.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := unpriv.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a connection from port %d: %v, want closed", unpriv.LocalAddr().(*net.TCPAddr).Port, err)
	}

	var priv *net.TCPConn
	for p := 1023; p > 600 && priv == nil; p-- {
		priv, _ = net.DialTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p}, addr)
	}
	if priv == nil {
		t.Fatal("no privileged port free")
	}
	defer priv.Close()
	var relayed net.Conn
	select {
	case relayed = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the privileged connection was not relayed")
	}
	if relayed == nil {
		t.FailNow()
	}
	defer relayed.Close()
	if _, err := priv.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(relayed, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("relayed %q, %v", buf, err)
	}
	if _, err := relayed.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(priv, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("back %q, %v", buf, err)
	}
}

func TestVolumeRequestsChecked(t *testing.T) {
	env := newEnv(t, "")
	ctx := testCtx(t)
	for _, req := range []agentapi.VolumeMountRequest{
		{Index: -1, Path: "/data"}, {Index: agentapi.MaxVolumes, Path: "/data"},
		{Index: 0, Path: "data"}, {Index: 0, Path: "/a/../b"}, {Index: 0, Path: "/"},
	} {
		if err := env.c.MountVolume(ctx, req); err == nil {
			t.Errorf("mount %+v accepted", req)
		}
	}
	if _, err := env.c.AcceptVolumeNFS(ctx, agentapi.MaxVolumes); err == nil {
		t.Error("a relay of an index past MaxVolumes accepted")
	}
}
