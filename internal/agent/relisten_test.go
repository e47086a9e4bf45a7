package agent

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"corral/internal/agentapi"
)

// A released listener removes its socket, keeps Accept waiting, and
// serves again after Relisten.
func TestHostListenerRelease(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	h, err := newHostListener("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		for {
			c, err := h.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket still there after Release: %v", err)
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Fatal("dial succeeded while released")
	}
	if err := h.Relisten(); err != nil {
		t.Fatal(err)
	}
	if err := h.Relisten(); err != nil { // a second signal is harmless
		t.Fatal(err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case got, ok := <-accepted:
		if !ok {
			t.Fatal("Accept failed across the release")
		}
		got.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted after Relisten")
	}
	h.Close()
	if _, ok := <-accepted; ok {
		t.Fatal("Accept returned a connection after Close")
	}
}

func TestCheckIdentity(t *testing.T) {
	bad := []agentapi.IdentityRequest{
		{Hostname: "-x"}, {Hostname: "a b"}, {Hostname: string(make([]byte, 65))},
		{MachineID: "ABC"}, {BootID: "not-a-uuid"}, {Entropy: make([]byte, 8)},
		{Entropy: make([]byte, agentapi.MaxEntropy+1)},
		{Network: &agentapi.IdentityNetwork{Address: "10.0.0.2", Gateway: "10.0.0.1"}},
		{Network: &agentapi.IdentityNetwork{Address: "10.0.0.2/30", Gateway: "x"}},
		{Nameservers: []string{"dns"}},
	}
	for _, req := range bad {
		if err := checkIdentity(&req); err == nil {
			t.Errorf("%+v accepted", req)
		}
	}
	good := agentapi.IdentityRequest{Hostname: "sb-abc", MachineID: "0123456789abcdef0123456789abcdef",
		BootID: "01234567-89ab-cdef-0123-456789abcdef", Entropy: make([]byte, 64),
		Network:     &agentapi.IdentityNetwork{Address: "10.0.0.2/30", Gateway: "10.0.0.1"},
		Nameservers: []string{"10.0.0.1"}}
	if err := checkIdentity(&good); err != nil {
		t.Error(err)
	}
}
