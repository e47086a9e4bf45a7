package manager

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"sync"

	"corral/internal/errdefs"
)

// newPortToken returns a fresh token for a sandbox's exposed ports.
func newPortToken() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// PortAccess checks that port is exposed on a running sandbox and that the
// caller may use it: a public port, the daemon's own token holder (admin),
// or the sandbox's port token.
func (m *Manager) PortAccess(id string, port int, token string, admin bool) error {
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w: no running sandbox %q", errdefs.ErrNotFound, id)
	}
	sb := l.snapshot()
	p, ok := sb.Spec.Exposed(port)
	if !ok {
		return fmt.Errorf("%w: port %d of sandbox %s is not exposed", errdefs.ErrNotFound, port, id)
	}
	if p.Public || admin {
		return nil
	}
	if token == "" {
		return fmt.Errorf("%w: port %d of sandbox %s needs its port token", errdefs.ErrUnauthenticated, port, id)
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(sb.PortToken)) != 1 {
		return fmt.Errorf("%w: wrong port token for sandbox %s", errdefs.ErrUnauthenticated, id)
	}
	return nil
}

// DialPort opens a connection to an exposed port inside a sandbox, through
// its agent. The sandbox counts as active until the connection is closed.
// remote and what describe the client for the event log.
func (m *Manager) DialPort(ctx context.Context, id string, port int, remote, what string) (net.Conn, error) {
	client, l, release, err := m.agentFor(id)
	if err != nil {
		return nil, err
	}
	if _, ok := l.snapshot().Spec.Exposed(port); !ok {
		release()
		return nil, fmt.Errorf("%w: port %d of sandbox %s is not exposed", errdefs.ErrNotFound, port, id)
	}
	conn, err := client.DialPort(ctx, port)
	fields := map[string]string{"port": fmt.Sprint(port), "remote": remote, "request": what}
	if err != nil {
		release()
		fields["error"] = err.Error()
		m.event(id, "port_connection", "exposed port connection failed", fields)
		return nil, err
	}
	m.event(id, "port_connection", "exposed port connection", fields)
	return &releasingConn{Conn: conn, release: release}, nil
}

// releasingConn releases the sandbox's activity when closed.
type releasingConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *releasingConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes when the underlying stream can.
func (c *releasingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
