// Package dnsd is the daemon's DNS resolver for sandboxes. The kernel layer
// DNATs every DNS packet a sandbox sends (UDP and TCP port 53) to this
// server; it answers each query under the sandbox's current network policy:
// names outside the domain allowlist get NXDOMAIN, allowed names are
// forwarded to the host's upstream resolver, and the answer is filtered so
// that an allowed name cannot point a sandbox at an always-denied address
// or one of the host's own networks (DNS rebinding). The addresses that survive are reported to the kernel
// layer (OnResolved) and remembered per sandbox (ResolvedNames) so that the
// egress proxy can check that a connection's destination belongs to the
// TLS SNI or HTTP Host name it claims.
//
// dnsd owns the query path only: it sets no firewall rules and keeps no
// event log (decisions go to the Decide callback). It imports only
// corral/internal/netpolicy/policy, corral/internal/errdefs,
// corral/internal/keylimit, the standard
// library and github.com/miekg/dns.
package dnsd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

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
	DefaultTimeout     = 4 * time.Second
	DefaultMaxTTL      = 5 * time.Minute
	DefaultMinOpen     = 2 * time.Minute
	DefaultMaxInFlight = 32
	// DefaultMaxInFlightTotal bounds the queries at the upstream, all
	// sandboxes together: half the UDP workers, so queries waiting on the
	// upstream never hold them all.
	DefaultMaxInFlightTotal   = maxUDPWorkers / 2
	DefaultGuaranteedInFlight = 4
	DefaultCacheSize          = 4096
	// DefaultUpstreamBurst and DefaultUpstreamRate bound the queries one
	// sandbox has forwarded to the upstream: a burst, then a rate a
	// second (a page load or a package install resolves tens of names; a
	// flood of made-up names past it is answered REFUSED, not forwarded to
	// the operator's resolver).
	DefaultUpstreamBurst = 100
	DefaultUpstreamRate  = 20
	// refusalReports is how often a sandbox refused by a bound is told.
	refusalReports = time.Second

	// maxQuery bounds a query read from a sandbox, over UDP or TCP.
	maxQuery = 4096
	// maxUDPReply bounds an answer sent over UDP (and the EDNS size asked
	// of the upstream), whatever the sandbox advertises.
	maxUDPReply = 4096
	// maxUDPWorkers bounds the goroutines answering UDP queries; packets
	// beyond it are dropped (the sandbox's stub retries).
	maxUDPWorkers = 1024
	// maxTCPConns bounds TCP connections overall, maxTCPConnsPerSource per
	// sandbox (or source address), each sandbox guaranteed
	// guaranteedTCPConns of them.
	maxTCPConns          = 256
	maxTCPConnsPerSource = 8
	guaranteedTCPConns   = 2
	// tcpIdle closes a TCP connection that sends no complete query.
	tcpIdle = 10 * time.Second
)

// Config configures a Server. Lookup is required.
type Config struct {
	// Upstream resolvers as host:port, tried in order. Default: the
	// nameservers of /etc/resolv.conf.
	Upstream []string
	Lookup   Lookup
	// Decide receives every decision (may be nil).
	Decide Decide
	// OnResolved is called with the addresses an allowed name resolved to
	// (A and AAAA records of the answer, always-denied ones removed) and
	// how long they should stay open: the kernel layer opens them in
	// domain mode. ttl is the capped answer TTL, but at least MinOpen.
	// It runs before the answer is sent, so the addresses are open before
	// the sandbox can use them; it must be quick.
	OnResolved func(sandboxID, name string, addrs []netip.Addr, ttl time.Duration)
	// OperatorAllowed re-opens always-denied ranges (the daemon's config);
	// addresses in them are not filtered from answers.
	OperatorAllowed []netip.Prefix
	// HostNetwork reports the host's own addresses and networks
	// (netpolicy.Network.HostNetwork), which answers lose as always-denied
	// addresses do. Nil: none.
	HostNetwork func(netip.Addr) bool
	Logger      *slog.Logger

	// Timeout bounds one forwarded query, all upstreams together.
	Timeout time.Duration
	// MaxTTL caps every TTL in answers given to sandboxes.
	MaxTTL time.Duration
	// MinOpen is the least time an answered address stays open and
	// remembered, so a client that connects a little after a short TTL
	// runs out still gets through.
	MinOpen time.Duration
	// MaxInFlight bounds the queries one sandbox has at the upstream,
	// MaxInFlightTotal those of all sandboxes together; each sandbox's
	// first GuaranteedInFlight are given whatever others hold (queries
	// beyond a sandbox's share never take the last half of the total:
	// keylimit.Shares).
	MaxInFlight        int
	MaxInFlightTotal   int
	GuaranteedInFlight int
	// CacheSize bounds the (address, name) pairs remembered per sandbox.
	CacheSize int
	// UpstreamBurst and UpstreamRate bound the queries one sandbox
	// forwards upstream: UpstreamBurst at once, then UpstreamRate a
	// second; a query past them is answered REFUSED and recorded as a
	// denied decision (ReasonUpstreamRate).
	UpstreamBurst int
	UpstreamRate  float64
}

// Server is the resolver. Create it with New, run it with Serve, stop it
// with Close.
type Server struct {
	cfg      Config
	log      *slog.Logger
	upstream []string
	// exchange forwards a query upstream; tests replace it.
	exchange func(ctx context.Context, q *dns.Msg) (*dns.Msg, error)

	ctx    context.Context // lifetime, cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // Serve calls and everything they started

	inflight   *keylimit.Shares // upstream queries, per sandbox
	forwards   *keylimit.Rate   // upstream queries a second, per sandbox
	tcpConns   *keylimit.Shares // TCP connections, per sandbox (or source)
	reports    keylimit.Every   // refusal reports, per sandbox
	udpWorkers chan struct{}
	cache      *cache
}

// New checks cfg, fills in defaults and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Lookup == nil {
		return nil, errdefs.Invalid("dnsd config", "Lookup is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Decide == nil {
		cfg.Decide = func(policy.Decision) {}
	}
	setDefault(&cfg.Timeout, DefaultTimeout)
	setDefault(&cfg.MaxTTL, DefaultMaxTTL)
	setDefault(&cfg.MinOpen, DefaultMinOpen)
	setDefault(&cfg.MaxInFlightTotal, DefaultMaxInFlightTotal)
	setDefault(&cfg.MaxInFlight, min(DefaultMaxInFlight, cfg.MaxInFlightTotal))
	setDefault(&cfg.GuaranteedInFlight, min(DefaultGuaranteedInFlight, cfg.MaxInFlight))
	inflight := &keylimit.Shares{Total: cfg.MaxInFlightTotal, PerKey: cfg.MaxInFlight,
		Guaranteed: cfg.GuaranteedInFlight, Reserve: cfg.MaxInFlightTotal / 2}
	if err := inflight.Check(); err != nil {
		return nil, errdefs.Invalid("dns queries in flight", "%v", err)
	}
	setDefault(&cfg.CacheSize, DefaultCacheSize)
	setDefault(&cfg.UpstreamBurst, DefaultUpstreamBurst)
	setDefault(&cfg.UpstreamRate, DefaultUpstreamRate)
	if cfg.UpstreamBurst < 1 || cfg.UpstreamRate <= 0 {
		return nil, errdefs.Invalid("dns upstream rate", "burst %d and rate %g a second must be positive", cfg.UpstreamBurst, cfg.UpstreamRate)
	}
	upstream := cfg.Upstream
	if len(upstream) == 0 {
		var err error
		if upstream, err = upstreamFromResolvConf("/etc/resolv.conf"); err != nil {
			return nil, err
		}
	}
	for _, u := range upstream {
		if _, _, err := net.SplitHostPort(u); err != nil {
			return nil, errdefs.Invalid("dnsd upstream", "%q is not host:port", u)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger.With("op", "dns"),
		upstream: upstream,
		ctx:      ctx,
		cancel:   cancel,
		inflight: inflight,
		forwards: &keylimit.Rate{Burst: cfg.UpstreamBurst, PerSecond: cfg.UpstreamRate},
		tcpConns: &keylimit.Shares{Total: maxTCPConns, PerKey: maxTCPConnsPerSource,
			Guaranteed: guaranteedTCPConns, Reserve: maxTCPConns / 2},
		reports:    keylimit.Every{Interval: refusalReports},
		udpWorkers: make(chan struct{}, maxUDPWorkers),
		cache:      newCache(cfg.CacheSize),
	}
	s.exchange = s.forward
	return s, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Serve answers queries on pc (UDP) and l (TCP) until ctx is cancelled or
// Close is called; either may be nil. Serve owns pc and l and closes them.
// It returns once every query it accepted is answered or abandoned: nil
// after cancellation, or the error that stopped a listener.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		closeAll(pc, l)
		return fmt.Errorf("dns server: %w", net.ErrClosed)
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	stopClose := context.AfterFunc(ctx, func() { closeAll(pc, l) })
	defer stopClose()

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				errs <- err
				cancel()
			}
		}()
	}
	if pc != nil {
		run(func() error { return s.serveUDP(ctx, pc, &wg) })
	}
	if l != nil {
		run(func() error { return s.serveTCP(ctx, l, &wg) })
	}
	<-ctx.Done()
	closeAll(pc, l)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func closeAll(pc net.PacketConn, l net.Listener) {
	if pc != nil {
		pc.Close()
	}
	if l != nil {
		l.Close()
	}
}

// Close stops every Serve call and waits for them and their queries.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// ResolvedNames returns the names this server resolved to addr for the
// sandbox and whose answers have not expired (lowercase, no trailing dot).
func (s *Server) ResolvedNames(sandboxID string, addr netip.Addr) []string {
	return s.cache.names(sandboxID, addr.Unmap(), time.Now())
}

// Forget drops what the server remembers of a sandbox; call it when the
// sandbox is removed.
func (s *Server) Forget(sandboxID string) {
	s.cache.forget(sandboxID)
}

// serveUDP reads queries and answers each on its own goroutine, at most
// maxUDPWorkers at a time.
func (s *Server) serveUDP(ctx context.Context, pc net.PacketConn, wg *sync.WaitGroup) error {
	buf := make([]byte, maxQuery)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading dns query: %w", err)
		}
		src := addrOf(from)
		if !src.IsValid() {
			continue
		}
		select {
		case s.udpWorkers <- struct{}{}:
		default:
			s.log.Debug("dropping dns query: too many in flight", "src", src)
			continue
		}
		raw := append([]byte(nil), buf[:n]...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-s.udpWorkers }()
			if reply := s.handle(ctx, src, raw, false); reply != nil {
				if _, err := pc.WriteTo(reply, from); err != nil && ctx.Err() == nil {
					s.log.Debug("writing dns reply", "src", src, "err", err)
				}
			}
		}()
	}
}

// serveTCP accepts connections and answers their queries one at a time.
func (s *Server) serveTCP(ctx context.Context, l net.Listener, wg *sync.WaitGroup) error {
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors and the like: wait and retry, like
			// net/http, rather than stop answering.
			backoff = nextBackoff(backoff)
			s.log.Warn("accepting dns connection", "err", err)
			sleepCtx(ctx, backoff)
			continue
		}
		backoff = 0
		src := addrOf(c.RemoteAddr())
		key := src.String()
		if id, _, ok := s.cfg.Lookup(src); ok {
			key = id
		}
		if s.tcpConns.Acquire(key) != keylimit.Granted {
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.tcpConns.Release(key)
			s.serveTCPConn(ctx, c, src)
		}()
	}
}

// nextBackoff doubles from 5ms up to a second.
func nextBackoff(d time.Duration) time.Duration {
	return min(max(2*d, 5*time.Millisecond), time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// addrOf returns the IP of a UDP or TCP address, IPv4-mapped addresses
// unmapped.
func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
