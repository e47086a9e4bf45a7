package manager

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// PortToken is the token that opens sb's non-public exposed ports. It is
// derived, never stored: an HMAC of the sandbox's id and creation time
// (nanoseconds; a warm pool's claim sets a new one, so a claimed sandbox
// gets a fresh token) under the daemon's port key. Whoever holds the API
// token reads it with the sandbox; nothing at rest reveals it.
func (m *Manager) PortToken(sb *sandbox.Sandbox) string {
	mac := hmac.New(sha256.New, m.cfg.PortKey)
	fmt.Fprintf(mac, "corral port token\x00%s\x00%d", sb.ID, sb.CreatedAt.UnixNano())
	return hex.EncodeToString(mac.Sum(nil)[:24])
}

// Ports is the exposed-port service: who may reach a sandbox's exposed
// ports through the daemon, and the connections to them (through the
// agent).
type Ports struct{ m *Manager }

// Access checks that port is exposed on a running sandbox and that the
// caller may use it: a public port, the daemon's own token holder (admin),
// or the sandbox's port token.
func (s Ports) Access(id string, port int, token string, admin bool) error {
	h := s.m.lookup(id)
	if h == nil {
		return fmt.Errorf("%w: no running sandbox %q", errdefs.ErrNotFound, id)
	}
	sb := h.Record()
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
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.m.PortToken(sb))) != 1 {
		return fmt.Errorf("%w: wrong port token for sandbox %s", errdefs.ErrUnauthenticated, id)
	}
	return nil
}

// Dial opens a connection to an exposed port inside a sandbox, through
// its agent. The sandbox counts as active until the connection is closed.
// remote and what describe the client for the event log.
// Each sandbox gets a share of the daemon's port connections (limits.go);
// one over it is refused with resource_exhausted.
func (s Ports) Dial(ctx context.Context, id string, port int, remote, what string) (net.Conn, error) {
	a, err := s.m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, ok := a.rec.Spec.Exposed(port); !ok {
		a.release()
		return nil, fmt.Errorf("%w: port %d of sandbox %s is not exposed", errdefs.ErrNotFound, port, id)
	}
	releaseSlot, err := s.acquirePortConn(id)
	if err != nil {
		a.release()
		return nil, err
	}
	release := func() { releaseSlot(); a.release() }
	conn, err := a.agent.DialPort(ctx, port)
	fields := map[string]string{"port": fmt.Sprint(port), "remote": remote, "request": what}
	if err != nil {
		release()
		fields["error"] = err.Error()
		a.h.Event("port_connection", "exposed port connection failed", fields)
		return nil, err
	}
	a.h.Event("port_connection", "exposed port connection", fields)
	return &releasingConn{Conn: conn, release: release}, nil
}

// releasingConn releases the sandbox's activity when closed (the release
// of an acquire may be called more than once).
type releasingConn struct {
	net.Conn
	release func()
}

func (c *releasingConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// CloseWrite half-closes when the underlying stream can.
func (c *releasingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
