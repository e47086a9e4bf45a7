package inproc

import (
	"errors"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Silence makes a sandbox's agent stop answering, as a guest that stopped
// its PID 1 would: its connections, current and new, pass no more bytes
// either way (what the agent sends is dropped).
func (r *Runtime) Silence(id string) {
	r.mu.Lock()
	b := r.boxes[id]
	r.mu.Unlock()
	if b != nil {
		select {
		case <-b.silenced:
		default:
			close(b.silenced)
		}
	}
}

// Drop closes a sandbox's agent connections while the sandbox and its
// agent run on, as a vm's virtio-serial port reset does: a new Dial
// reaches the agent again.
func (r *Runtime) Drop(id string) {
	r.mu.Lock()
	var conns []net.Conn
	if b := r.boxes[id]; b != nil {
		conns, b.conns = b.conns, nil
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Hijack stands in for a guest that removed its agent's socket and bound
// one of its own in its place: connections report it
// (agentapi.ChannelChecker), and a new one reaches something that is not
// an agent.
func (r *Runtime) Hijack(id string) {
	r.mu.Lock()
	b := r.boxes[id]
	r.mu.Unlock()
	if b != nil {
		b.hijacked.Store(true)
	}
}

// boxConn is a connection to a sandbox's agent that Silence and Hijack
// act on.
type boxConn struct {
	net.Conn
	b         *box
	closeOnce sync.Once
	closed    chan struct{}
}

func (c *boxConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	return c.gate(n, err)
}

// Write drops what it is given once the agent is silenced, as a socket
// buffer takes what a stopped peer never reads.
func (c *boxConn) Write(p []byte) (int, error) {
	select {
	case <-c.b.silenced:
		return len(p), nil
	default:
		return c.Conn.Write(p)
	}
}

// gate passes a read's (n, err) on while the agent answers; once it is
// silenced it holds the reader until the connection is closed.
func (c *boxConn) gate(n int, err error) (int, error) {
	select {
	case <-c.b.silenced:
		<-c.closed
		return 0, net.ErrClosed
	default:
		return n, err
	}
}

func (c *boxConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// CheckChannel reports a hijacked channel (agentapi.ChannelChecker).
func (c *boxConn) CheckChannel() error {
	if c.b.hijacked.Load() {
		return errors.New("the agent's socket was replaced by another file")
	}
	return nil
}

// impostor is what a hijacked channel reaches: a peer that answers
// something that is not HTTP/2 and hangs up.
func impostor() (net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	theirs := os.NewFile(uintptr(fds[1]), "impostor")
	_, _ = theirs.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\nnot an agent\n"))
	theirs.Close()
	f := os.NewFile(uintptr(fds[0]), "hijacked")
	defer f.Close()
	return net.FileConn(f)
}
