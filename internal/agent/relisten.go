package agent

import (
	"net"
	"strings"
	"sync"
)

// hostListener is the agent's listener on a unix socket the host reaches
// through gVisor's --host-uds. A memory snapshot cannot hold such a socket
// (runsc refuses to save a socket bound on the host), so the agent closes
// it when the host ends its session before a snapshot (Release) and listens
// again on SIGUSR2 (Relisten), which the runtime sends once the sandbox
// runs again: restored from the snapshot, or left running after it.
// Accept waits through a release instead of failing.
type hostListener struct {
	addr string

	mu     sync.Mutex
	cur    net.Listener  // nil while released
	ready  chan struct{} // closed when cur is set again
	closed chan struct{}
}

func newHostListener(addr string) (*hostListener, error) {
	l, err := listenUnix(addr)
	if err != nil {
		return nil, err
	}
	return &hostListener{addr: addr, cur: l, ready: make(chan struct{}), closed: make(chan struct{})}, nil
}

// Accept returns the next connection, waiting while the listener is
// released.
func (h *hostListener) Accept() (net.Conn, error) {
	for {
		h.mu.Lock()
		l, ready := h.cur, h.ready
		h.mu.Unlock()
		if l == nil {
			select {
			case <-ready:
				continue
			case <-h.closed:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Accept()
		if err == nil {
			return c, nil
		}
		h.mu.Lock()
		released := h.cur != l
		h.mu.Unlock()
		if !released {
			return nil, err
		}
	}
}

// Release closes the socket (removing its file) until Relisten.
func (h *hostListener) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		return nil
	}
	err := h.cur.Close()
	h.cur, h.ready = nil, make(chan struct{})
	return err
}

// Relisten listens again after a Release; it does nothing while listening.
func (h *hostListener) Relisten() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closed:
		return net.ErrClosed
	default:
	}
	if h.cur != nil {
		return nil
	}
	l, err := listenUnix(h.addr)
	if err != nil {
		return err
	}
	h.cur = l
	close(h.ready)
	return nil
}

// Close closes the listener for good.
func (h *hostListener) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closed:
		return nil
	default:
		close(h.closed)
	}
	if h.cur != nil {
		return h.cur.Close()
	}
	return nil
}

// Addr is the socket's address.
func (h *hostListener) Addr() net.Addr {
	return &net.UnixAddr{Name: strings.TrimPrefix(h.addr, "unix:"), Net: "unix"}
}
