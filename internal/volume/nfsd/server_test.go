package nfsd

import (
	"io"
	"net"
	"testing"
	"time"
)

// Past MaxConns a new connection closes the oldest, so connections the
// library abandoned never lock an export out.
func TestMaxConnsClosesOldest(t *testing.T) {
	root, _ := layout(t)
	s, err := newLocalServer(root, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ours []net.Conn
	for range MaxConns + 1 {
		a, b := net.Pipe()
		ours = append(ours, a)
		if err := s.serve(b); err != nil {
			t.Fatal(err)
		}
	}
	_ = ours[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := ours[0].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the oldest connection: %v, want closed (EOF)", err)
	}
	s.l.mu.Lock()
	n := len(s.l.conns)
	s.l.mu.Unlock()
	if n != MaxConns {
		t.Fatalf("%d connections open, want %d", n, MaxConns)
	}
}
