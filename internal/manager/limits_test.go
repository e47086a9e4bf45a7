package manager

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// A sandbox's port connections are bounded by its share: one over it is
// resource_exhausted naming the bound, the refusal is in the sandbox's
// events once however often it recurs, and a closed connection frees its
// slot. (The in-process runtime's agent dials the test's own loopback.)
func TestPortConnShares(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
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
			defer c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	e := newEnv(t)
	shares, err := PortConns{Max: 4, PerSandbox: 2, Guaranteed: 1}.shares()
	if err != nil {
		t.Fatal(err)
	}
	e.m.portConns = shares
	sb := e.create(sandbox.Spec{Expose: []sandbox.ExposedPort{{Port: port}}})
	ctx := context.Background()
	dial := func() (net.Conn, error) { return e.m.Ports().Dial(ctx, sb.ID, port, "test", "tunnel") }
	var conns []net.Conn
	for range 2 {
		c, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for range 3 {
		if _, err := dial(); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "per_sandbox limit of 2") {
			t.Fatalf("third connection: %v", err)
		}
	}
	evs, err := e.m.Events(ctx, sb.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var limits []string
	for _, ev := range evs {
		if ev.Kind == "limit_reached" {
			limits = append(limits, ev.Fields["resource"]+" "+ev.Fields["limit"]+" "+ev.Fields["max"]+" "+ev.Fields["refused"])
		}
	}
	if len(limits) != 1 || limits[0] != "port_connections per_sandbox 2 1" {
		t.Errorf("limit events %q, want one for the first refusal", limits)
	}
	conns[0].Close()
	c, err := dial()
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	c.Close()
	conns[1].Close()
	if held, total := e.m.portConns.Held(sb.ID); held != 0 || total != 0 {
		t.Errorf("%d (%d in all) held after every connection closed", held, total)
	}
}
