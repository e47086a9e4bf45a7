package agentapi

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// frozenRelay puts a relay between the client and conn (the agent's end)
// and returns the client's end and a func that freezes the relay: from
// then on nothing passes either way, as when the agent is stopped.
func frozenRelay(t *testing.T, conn net.Conn) (net.Conn, func()) {
	t.Helper()
	client, relay := net.Pipe()
	frozen := make(chan struct{})
	var once sync.Once
	pump := func(dst io.Writer, src io.Reader) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-frozen:
				<-make(chan struct{}) // holds the bytes forever, as a stopped agent does
			default:
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pump(conn, relay)
	go pump(relay, conn)
	t.Cleanup(func() { client.Close(); relay.Close(); conn.Close() })
	return client, func() { once.Do(func() { close(frozen) }) }
}

// TestSilentAgentDropped: an agent that stops answering (a stopped PID 1,
// a channel held by a guest process that says nothing) is noticed by the
// health check even while no call is in flight, and Err says so; a
// healthy agent stays connected across many checks.
func TestSilentAgentDropped(t *testing.T) {
	oldAfter, oldTimeout := PingAfter, PingTimeout
	PingAfter, PingTimeout = 100*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { PingAfter, PingTimeout = oldAfter, oldTimeout })

	conn, _ := fakeAgent(t, agentMux([]int{1}, nil))
	relayed, freeze := frozenRelay(t, conn)
	c, err := NewClient(context.Background(), relayed)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-c.Done():
		t.Fatalf("a healthy agent was dropped: %v", c.Err())
	case <-time.After(10 * (PingAfter + PingTimeout)):
	}
	if c.Err() != nil {
		t.Fatalf("Err of a live connection = %v", c.Err())
	}
	freeze()
	select {
	case <-c.Done():
	case <-time.After(time.Minute):
		t.Fatal("a silent agent was never noticed")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "no answer to a health check") {
		t.Fatalf("Err = %v, want no answer to a health check", err)
	}
}

// TestClientErr: Err tells the daemon's own Close from the agent going.
func TestClientErr(t *testing.T) {
	c, _ := newFakeClient(t, nil)
	c.Close()
	<-c.Done()
	if err := c.Err(); !errors.Is(err, ErrClientClosed) {
		t.Errorf("Err after Close = %v", err)
	}
	c, stop := newFakeClient(t, nil)
	stop()
	select {
	case <-c.Done():
	case <-time.After(time.Minute):
		t.Fatal("the agent's close was never noticed")
	}
	if err := c.Err(); err == nil || errors.Is(err, ErrClientClosed) || !strings.Contains(err.Error(), "agent") {
		t.Errorf("Err after the agent closed = %v", err)
	}
}
