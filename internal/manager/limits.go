package manager

import (
	"fmt"
	"sync"
	"time"

	"corral/internal/errdefs"
	"corral/internal/keylimit"
	"corral/internal/sandboxlog"
)

// Fair shares of the daemon's connection services. The resolver and the
// egress proxy bound themselves (their refusals reach RecordDecision);
// the exposed-port proxy's bound is here, in Ports.Dial.
const (
	DefaultMaxPortConns           = 4096
	DefaultMaxPortConnsPerSandbox = 256
	DefaultGuaranteedPortConns    = 32
	// limitReports is how often a sandbox refused by a bound is told.
	limitReports = time.Second
)

// PortConns bounds connections to exposed ports: Max in all, PerSandbox
// to one sandbox, each sandbox's first Guaranteed given whatever others
// hold (connections beyond a sandbox's share never take the last half of
// Max: keylimit.Shares). Zero fields take the defaults.
type PortConns struct {
	Max, PerSandbox, Guaranteed int
}

func (c PortConns) shares() (*keylimit.Shares, error) {
	if c.Max <= 0 {
		c.Max = DefaultMaxPortConns
	}
	if c.PerSandbox <= 0 {
		c.PerSandbox = min(DefaultMaxPortConnsPerSandbox, c.Max)
	}
	if c.Guaranteed <= 0 {
		c.Guaranteed = min(DefaultGuaranteedPortConns, c.PerSandbox)
	}
	s := &keylimit.Shares{Total: c.Max, PerKey: c.PerSandbox, Guaranteed: c.Guaranteed, Reserve: c.Max / 2}
	if err := s.Check(); err != nil {
		return nil, errdefs.Invalid("port connections", "%v", err)
	}
	return s, nil
}

// limitEvent tells sandbox id that a fair-share bound refused it
// (sandboxlog.LimitEvent). Callers rate-limit.
func (m *Manager) limitEvent(id, resource, limit string, max, refused int) {
	msg, f := sandboxlog.LimitEvent(resource, limit, max, refused)
	m.event(id, "limit_reached", msg, f)
}

// acquirePortConn takes a slot of sandbox id's share of port connections,
// or reports the refusal (in the sandbox's events, at most once a second)
// and returns a resource_exhausted error naming the bound.
func (s Ports) acquirePortConn(id string) (release func(), err error) {
	m := s.m
	r := m.portConns.Acquire(id)
	if r == keylimit.Granted {
		return sync.OnceFunc(func() { m.portConns.Release(id) }), nil
	}
	max := m.portConns.PerKey
	if r == keylimit.RefusedShared {
		max = m.portConns.Total
	}
	if report, n := m.portReports.Allow(id+" "+r.String(), time.Now()); report {
		m.limitEvent(id, "port_connections", r.String(), max, n)
	}
	return nil, fmt.Errorf("%w: port connections: sandbox %s is at the %s limit of %d", errdefs.ErrResourceExhausted, id, r, max)
}
