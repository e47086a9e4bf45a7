// Package egress is the daemon's transparent TCP egress proxy for
// sandboxes. The kernel layer DNATs every new TCP connection a sandbox
// opens to this proxy; the proxy recovers the original destination
// (SO_ORIGINAL_DST), applies the sandbox's current network policy, and
// either splices the connection to that destination or closes it. In
// domain mode (a domain allowlist) it peeks at the first bytes, without
// terminating TLS, for the TLS SNI or the HTTP/1.x Host header: the name
// must be allowed and the destination must be an address the daemon's
// resolver answered with for that name to this sandbox, so that an address
// obtained some other way, or a forged SNI/Host, does not get through.
// Every decision goes to the Decide callback for the sandbox's event log.
//
// What the proxy cannot see, without terminating TLS: the name inside an
// encrypted ClientHello (the resolver strips ECH configs in domain mode,
// so clients do not offer one), the Host of a request inside TLS, and the
// later requests of a kept-alive HTTP connection. Those can only name
// another site served from the same address (domain fronting); the
// destination is always an address the resolver gave for an allowed name.
//
// egress owns the connection path only: no firewall rules, no DNS, no event
// storage. It imports only corral/internal/netpolicy/policy,
// corral/internal/errdefs, corral/internal/keylimit, the standard library
// and golang.org/x/sys/unix.
package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"corral/internal/errdefs"
	"corral/internal/keylimit"
	"corral/internal/netpolicy/policy"
)

// Lookup and Decide are the network layer's shared callback types.
type (
	Lookup = policy.Lookup
	Decide = policy.Decide
)

// Defaults and bounds.
const (
	DefaultPeekTimeout        = 5 * time.Second
	DefaultIdleTimeout        = 10 * time.Minute
	DefaultDialTimeout        = 10 * time.Second
	DefaultMaxConns           = 4096
	DefaultMaxConnsPerSandbox = 256
	DefaultGuaranteedConns    = 32
	// refusalReports is how often a sandbox refused by a bound is told.
	refusalReports = time.Second

	// MaxPeek bounds the bytes read before a decision in domain mode.
	MaxPeek = 16 << 10
	// localAddrsTTL is how long the host's own addresses are cached.
	localAddrsTTL = 5 * time.Second
)

// Config configures a Proxy. Lookup is required.
type Config struct {
	Lookup Lookup
	// Decide receives every decision (may be nil).
	Decide Decide
	// Resolved returns the names the daemon's resolver gave this sandbox
	// for dst (dnsd.Server.ResolvedNames). Nil: no name matches, so domain
	// mode denies everything.
	Resolved func(sandboxID string, dst netip.Addr) []string
	// OperatorAllowed re-opens always-denied ranges (the daemon's config).
	OperatorAllowed []netip.Prefix
	// HostNetwork reports the host's own addresses and networks that the
	// operator has not re-opened (netpolicy.Network.HostNetwork): denied
	// as the kernel's rules deny them. Nil: none.
	HostNetwork func(netip.Addr) bool
	// Deny is denied whatever the policy and OperatorAllowed say: the
	// daemon passes the sandbox address pool, so a re-opened private range
	// never reaches another sandbox through the proxy.
	Deny []netip.Prefix
	// Dial connects to an allowed destination. Default: net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// OriginalDst recovers a connection's destination before the kernel's
	// DNAT. Default: OriginalDst (SO_ORIGINAL_DST).
	OriginalDst func(*net.TCPConn) (netip.AddrPort, error)
	// LocalAddrs lists the host's own addresses, which the proxy never
	// dials (it runs on the host, where they would reach the host's own
	// services). Default: net.InterfaceAddrs, cached for a few seconds.
	LocalAddrs func() ([]netip.Addr, error)
	Logger     *slog.Logger

	// Intercept returns a sandbox's header rules (inject.go); nil, or a
	// nil answer: nothing is intercepted.
	Intercept func(sandboxID string) *Interception
	// Injected receives reports of injected requests (may be nil).
	Injected func(Injection)
	// UpstreamRoots verifies intercepted hosts' real certificates; nil:
	// the system's roots.
	UpstreamRoots *x509.CertPool

	// PeekTimeout bounds the wait for a ClientHello or request header.
	PeekTimeout time.Duration
	// IdleTimeout closes a spliced connection with no traffic either way.
	IdleTimeout time.Duration
	// DialTimeout bounds the connection to the destination.
	DialTimeout time.Duration
	// MaxConns bounds concurrent connections, all sandboxes together;
	// MaxConnsPerSandbox bounds one sandbox's. GuaranteedConns is each
	// sandbox's share: its first GuaranteedConns connections are given
	// whatever other sandboxes hold, because connections beyond a
	// sandbox's share never take the last half of MaxConns
	// (keylimit.Shares).
	MaxConns           int
	MaxConnsPerSandbox int
	GuaranteedConns    int
}

// Proxy is the egress proxy. Create it with New, run it with Serve, stop
// it with Close.
type Proxy struct {
	cfg Config
	log *slog.Logger

	ctx    context.Context // lifetime, cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // Serve calls and their connections

	shares  *keylimit.Shares // connection bounds
	reports keylimit.Every   // refusal reports, per sandbox and bound
	// injections paces Injected reports.
	injections keylimit.Every
	// dialFails paces the log lines of failed dials, per sandbox.
	dialFails keylimit.Every
	local     localAddrs
}

// New checks cfg, fills in defaults and returns a Proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Lookup == nil {
		return nil, errdefs.Invalid("egress config", "Lookup is required")
	}
	if cfg.Decide == nil {
		cfg.Decide = func(policy.Decision) {}
	}
	if cfg.Resolved == nil {
		cfg.Resolved = func(string, netip.Addr) []string { return nil }
	}
	if cfg.OriginalDst == nil {
		cfg.OriginalDst = OriginalDst
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	setDefault(&cfg.PeekTimeout, DefaultPeekTimeout)
	setDefault(&cfg.IdleTimeout, DefaultIdleTimeout)
	setDefault(&cfg.DialTimeout, DefaultDialTimeout)
	setDefault(&cfg.MaxConns, DefaultMaxConns)
	setDefault(&cfg.MaxConnsPerSandbox, min(DefaultMaxConnsPerSandbox, cfg.MaxConns))
	setDefault(&cfg.GuaranteedConns, min(DefaultGuaranteedConns, cfg.MaxConnsPerSandbox))
	shares := &keylimit.Shares{Total: cfg.MaxConns, PerKey: cfg.MaxConnsPerSandbox,
		Guaranteed: cfg.GuaranteedConns, Reserve: cfg.MaxConns / 2}
	if err := shares.Check(); err != nil {
		return nil, errdefs.Invalid("egress connections", "%v", err)
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.DialTimeout}
		cfg.Dial = d.DialContext
	}
	if cfg.LocalAddrs == nil {
		cfg.LocalAddrs = interfaceAddrs
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{
		cfg:        cfg,
		log:        cfg.Logger.With("op", "egress"),
		ctx:        ctx,
		cancel:     cancel,
		shares:     shares,
		reports:    keylimit.Every{Interval: refusalReports},
		injections: keylimit.Every{Interval: refusalReports},
		dialFails:  keylimit.Every{Interval: refusalReports},
		local:      localAddrs{list: cfg.LocalAddrs},
	}, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Serve accepts connections on l until ctx is cancelled or Close is
// called, and handles each on its own goroutine. Serve owns l and closes
// it; when it returns, every connection it accepted is closed. It returns
// nil after cancellation, or the error that stopped the listener.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return fmt.Errorf("egress proxy: %w", net.ErrClosed)
	}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	stopClose := context.AfterFunc(ctx, func() { l.Close() })
	defer stopClose()

	var conns sync.WaitGroup
	defer conns.Wait()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors and the like: wait and retry, like
			// net/http, rather than stop proxying.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			p.log.Warn("accepting connection", "err", err)
			sleepCtx(ctx, backoff)
			continue
		}
		backoff = 0
		tc, ok := c.(*net.TCPConn)
		if !ok {
			c.Close()
			return fmt.Errorf("egress proxy: listener gave a %T, want TCP", c)
		}
		sandboxID, pol, ok := p.admit(tc)
		if !ok {
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer p.shares.Release(sandboxID)
			p.handle(ctx, tc, sandboxID, pol)
		}()
	}
}

// admit finds the sandbox of a new connection and takes a slot of its
// share; a connection from no sandbox, or over a bound, is closed (reset)
// here, before any goroutine is spent on it.
func (p *Proxy) admit(c *net.TCPConn) (string, policy.Policy, bool) {
	src := addrPortOf(c.RemoteAddr()).Addr()
	sandboxID, pol, ok := p.cfg.Lookup(src)
	if !ok {
		p.log.Warn("connection from unknown source", "src", src)
		c.Close()
		return "", pol, false
	}
	r := p.shares.Acquire(sandboxID)
	if r == keylimit.Granted {
		return sandboxID, pol, true
	}
	if report, n := p.reports.Allow(sandboxID+" "+r.String(), time.Now()); report {
		d := policy.Decision{SandboxID: sandboxID, Proto: "tcp", Via: "proxy", Limit: r.String(), Refused: n}
		if dst, err := p.cfg.OriginalDst(c); err == nil {
			d.Dst, d.Port = dst.Addr().Unmap(), dst.Port()
		}
		d.LimitMax = p.cfg.MaxConnsPerSandbox
		if r == keylimit.RefusedShared {
			d.LimitMax = p.cfg.MaxConns
		}
		p.decide(d, false, ReasonTooMany)
		p.log.Info("connections refused: sandbox over its share", "sandbox", sandboxID, "limit", r.String(), "refused", n)
	}
	c.SetLinger(0)
	c.Close()
	return "", pol, false
}

// Close stops every Serve call and waits for them and their connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// localAddrs caches the host's own addresses for localAddrsTTL.
type localAddrs struct {
	list func() ([]netip.Addr, error)

	mu      sync.Mutex
	addrs   map[netip.Addr]bool
	fetched time.Time
}

// contains reports whether a is one of the host's addresses. When they
// cannot be listed, every address counts as local: the proxy fails closed.
func (l *localAddrs) contains(a netip.Addr) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addrs == nil || time.Since(l.fetched) > localAddrsTTL {
		list, err := l.list()
		if err != nil {
			l.addrs = nil
			return true, fmt.Errorf("listing the host's addresses: %w", err)
		}
		l.addrs = map[netip.Addr]bool{}
		for _, x := range list {
			l.addrs[x.Unmap()] = true
		}
		l.fetched = time.Now()
	}
	return l.addrs[a.Unmap()], nil
}

func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out, nil
}
