package agentapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Err says why Done was closed (nil before): the daemon closed the
// connection (ErrClientClosed), the agent closed it or it failed, or the
// client dropped it because the agent went silent (no answer to a health
// PING) or broke the HTTP/2 protocol.
func (c *Client) Err() error {
	select {
	case <-c.conn.done:
	default:
		return nil
	}
	c.conn.mu.Lock()
	defer c.conn.mu.Unlock()
	if c.conn.cause == nil {
		return c.conn.dropped
	}
	return c.conn.cause
}

// errDropped is why the client's transport closes the connection by
// itself: the health check failed, or the agent broke the protocol.
func errDropped() error {
	return fmt.Errorf("dropped by the daemon: no answer to a health check within %s, or the agent broke the HTTP/2 protocol", PingAfter+PingTimeout)
}

// ErrClientClosed is Err after Close.
var ErrClientClosed = errors.New("closed by the daemon")

// ChannelChecker is a connection whose far end a guest could replace (a
// socket file in a directory the guest writes): CheckChannel reports an
// error once the connection no longer goes through the channel's current
// end.
type ChannelChecker interface {
	CheckChannel() error
}

// CheckChannel asks the connection whether it still goes through the
// sandbox's agent channel (ChannelChecker); nil when the runtime's
// connections cannot tell.
func (c *Client) CheckChannel() error {
	if cc, ok := c.conn.Conn.(ChannelChecker); ok {
		return cc.CheckChannel()
	}
	return nil
}

// watchedConn closes done when the connection fails or is closed, which is
// how Client.Done learns that the agent is gone.
type watchedConn struct {
	net.Conn
	once sync.Once
	done chan struct{}

	// dropped is errDropped as of the connection's start, when its
	// transport took the health check's timings.
	dropped error

	mu    sync.Mutex
	cause error // the first failure seen (Client.Err)
}

func newWatchedConn(c net.Conn) *watchedConn {
	return &watchedConn{Conn: c, done: make(chan struct{}), dropped: errDropped()}
}

// note records err as the connection's end, unless one is recorded.
func (w *watchedConn) note(err error) {
	w.mu.Lock()
	if w.cause == nil {
		w.cause = err
	}
	w.mu.Unlock()
}

// Read notes a failed connection.
func (w *watchedConn) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if err != nil {
		if errors.Is(err, io.EOF) {
			w.note(errors.New("the agent closed the connection"))
		} else if !errors.Is(err, net.ErrClosed) {
			w.note(fmt.Errorf("reading from the agent: %w", err))
		}
		w.lost()
	}
	return n, err
}

// Write notes a failed connection.
func (w *watchedConn) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	if err != nil {
		if !errors.Is(err, net.ErrClosed) {
			w.note(fmt.Errorf("writing to the agent: %w", err))
		}
		w.lost()
	}
	return n, err
}

// Close notes the closed connection: closed by Client.Close (which noted
// that first), or by the HTTP/2 transport itself.
func (w *watchedConn) Close() error {
	w.note(w.dropped)
	w.lost()
	return w.Conn.Close()
}

func (w *watchedConn) lost() { w.once.Do(func() { close(w.done) }) }
