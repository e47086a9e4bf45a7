package nfsd

import (
	"context"
	"errors"
	"net"
	"sync"

	nfs "github.com/willscott/go-nfs"
)

// localServer is the NFSv3 server of one export in this process (the
// child's, child.go): one volume, read-write or read-only, for one
// sandbox's mount. It has no socket of its own: the connections it serves
// are the streams the sandbox's agent relays, so it is reachable from that
// guest only.
type localServer struct {
	fs     *FS
	l      *connListener
	cancel context.CancelFunc
	done   chan struct{}
}

// newLocalServer serves root (a volume's host mount) until Close.
func newLocalServer(root string, readOnly bool) (*localServer, error) {
	f, err := NewFS(root, readOnly)
	if err != nil {
		return nil, err
	}
	quiet()
	ctx, cancel := context.WithCancel(context.Background())
	s := &localServer{fs: f, l: newConnListener(), cancel: cancel, done: make(chan struct{})}
	srv := &nfs.Server{Handler: newHandler(f), Context: ctx}
	go func() {
		defer close(s.done)
		_ = srv.Serve(s.l)
	}()
	return s, nil
}

// serve hands one connection to the server, which owns it from then on;
// ErrClosed once the server is closed.
func (s *localServer) serve(c net.Conn) error { return s.l.push(c) }

// Close stops the server and closes every connection it serves.
func (s *localServer) Close() error {
	s.l.Close()
	s.cancel()
	<-s.done
	s.l.closeConns()
	return s.fs.Close()
}

// ErrClosed is a serve's error after Close.
var ErrClosed = errors.New("nfs server closed")

// connListener is a net.Listener whose connections are pushed to it.
type connListener struct {
	ch chan net.Conn

	mu     sync.Mutex
	closed bool
	conns  []net.Conn
	stop   chan struct{}
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), stop: make(chan struct{})}
}

// MaxConns bounds the connections one export serves at once (the guest's
// NFS client uses one, and one more for each mount call). A new one past
// it closes the oldest: the library abandons a connection after a
// malformed call without closing it, and the guest's client redials a
// connection it lost, so the export never locks itself out.
const MaxConns = 4

func (l *connListener) push(c net.Conn) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	var oldest net.Conn
	if len(l.conns) >= MaxConns {
		oldest = l.conns[0]
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns = append(l.conns, tc)
	l.mu.Unlock()
	if oldest != nil {
		oldest.Close() // leaves l.conns (trackedConn)
	}
	select {
	case l.ch <- tc:
		return nil
	case <-l.stop:
		return ErrClosed
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.stop:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.stop)
	}
	return nil
}

func (l *connListener) closeConns() {
	l.mu.Lock()
	defer l.mu.Unlock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	l.mu.Lock()
}

func (l *connListener) forget(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.conns {
		if x == c {
			l.conns = append(l.conns[:i], l.conns[i+1:]...)
			return
		}
	}
}

// trackedConn leaves its listener's count when closed.
type trackedConn struct {
	net.Conn
	l    *connListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.l.forget(c) })
	return c.Conn.Close()
}

func (l *connListener) Addr() net.Addr { return relayAddr{} }

type relayAddr struct{}

func (relayAddr) Network() string { return "corral-agent" }
func (relayAddr) String() string  { return "nfs-relay" }
