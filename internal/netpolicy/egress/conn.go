package egress

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"corral/internal/netpolicy/policy"
)

// Reasons recorded in the proxy's decisions (besides those of
// policy.Policy.AllowsAddr: "network blocked", "internal range", "not in
// cidr_allowlist").
const (
	ReasonTooMany        = "too many connections"
	ReasonProxyItself    = "connection to the proxy itself"
	ReasonHostAddress    = "host address"
	ReasonHostNetwork    = "host network"
	ReasonDenied         = "denied range"
	ReasonNotTLSOrHTTP   = "not tls or http"
	ReasonNoName         = "no name"
	ReasonPeekTimeout    = "no tls client hello or http request in time"
	ReasonTooLarge       = "client hello or request header too large"
	ReasonBadTLS         = "malformed tls client hello"
	ReasonBadHTTP        = "malformed http request"
	ReasonConnect        = "http connect"
	ReasonSNINotAllowed  = "sni not allowed"
	ReasonHostNotAllowed = "host not allowed"
	ReasonSNIMismatch    = "sni does not match destination"
	ReasonHostMismatch   = "host header does not match destination"
)

// handle decides one sandbox connection and, when it is allowed, splices
// it to its original destination. It always closes c.
func (p *Proxy) handle(ctx context.Context, c *net.TCPConn, sandboxID string, pol policy.Policy) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()

	log := p.log.With("sandbox", sandboxID)
	dst, err := p.cfg.OriginalDst(c)
	if err != nil {
		log.Warn("connection without original destination", "src", c.RemoteAddr(), "err", err)
		return
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	d := policy.Decision{SandboxID: sandboxID, Proto: "tcp", Via: "proxy", Dst: dst.Addr(), Port: dst.Port()}
	if reason := p.checkAddr(pol, dst, c, log); reason != "" {
		p.decide(d, false, reason)
		return
	}
	var peeked []byte
	if len(pol.DomainAllowlist) > 0 {
		var reason string
		peeked, d.Domain, reason = p.checkName(sandboxID, pol, c, dst.Addr(), log)
		if reason != "" {
			p.decide(d, false, reason)
			return
		}
	}
	ic, names := p.interceptFor(sandboxID, dst.Addr())
	if ic != nil && peeked == nil {
		// Only a destination resolved for a ruled host is peeked at
		// outside domain mode; a failed peek is spliced as it was.
		var err error
		peeked, _, d.Domain, err = peekName(c, p.cfg.PeekTimeout)
		if err != nil {
			d.Domain = ""
		}
	}
	p.decide(d, true, "")
	if ic != nil && d.Domain != "" && slices.Contains(names, d.Domain) {
		if peeked[0] == recordHandshake {
			p.terminate(ctx, c, peeked, sandboxID, d.Domain, dst, ic, log)
			return
		}
		p.injected(Injection{SandboxID: sandboxID, Host: d.Domain, Skipped: "plain HTTP: secret headers go over TLS only"})
	}
	p.forward(ctx, c, sandboxID, dst, peeked, log)
}

// checkAddr applies everything but names: the proxy itself, the host's
// addresses, Deny, always-denied ranges, the host's networks, then the
// rest of the address part of the policy.
func (p *Proxy) checkAddr(pol policy.Policy, dst netip.AddrPort, c net.Conn, log *slog.Logger) string {
	if pol.BlockNetwork {
		return "network blocked"
	}
	if dst == addrPortOf(c.LocalAddr()) {
		return ReasonProxyItself
	}
	local, err := p.local.contains(dst.Addr())
	if err != nil {
		log.Warn("denying: cannot tell the host's addresses", "err", err)
	}
	if local {
		return ReasonHostAddress
	}
	for _, r := range p.cfg.Deny {
		if r.Contains(dst.Addr()) {
			return ReasonDenied
		}
	}
	// An always-denied range keeps its own reason, as in the kernel's
	// rules, which check it before the host's networks.
	if !policy.Denied(dst.Addr(), p.cfg.OperatorAllowed) && p.cfg.HostNetwork != nil && p.cfg.HostNetwork(dst.Addr()) {
		return ReasonHostNetwork
	}
	if ok, why := pol.AllowsAddr(dst.Addr(), p.cfg.OperatorAllowed); !ok {
		return why
	}
	return ""
}

// checkName peeks at the start of the stream for a name and checks it
// against the domain allowlist and the resolver's answers. It returns the
// bytes read (to replay), the name when one was found, and the reason to
// deny, if any.
func (p *Proxy) checkName(sandboxID string, pol policy.Policy, c net.Conn, dst netip.Addr, log *slog.Logger) ([]byte, string, string) {
	peeked, kind, name, err := peekName(c, p.cfg.PeekTimeout)
	if err != nil {
		reason := peekReason(err)
		log.Debug("no name to check", "dst", dst, "reason", reason, "err", err)
		return nil, name, reason
	}
	if !pol.AllowsName(name) {
		if kind == kindTLS {
			return nil, name, ReasonSNINotAllowed
		}
		return nil, name, ReasonHostNotAllowed
	}
	if !slices.ContainsFunc(p.cfg.Resolved(sandboxID, dst), func(n string) bool {
		return strings.EqualFold(strings.TrimSuffix(n, "."), name)
	}) {
		if kind == kindTLS {
			return nil, name, ReasonSNIMismatch
		}
		return nil, name, ReasonHostMismatch
	}
	return peeked, name, ""
}

func (p *Proxy) decide(d policy.Decision, allowed bool, reason string) {
	d.Time = time.Now()
	d.Allowed = allowed
	d.Reason = reason
	p.cfg.Decide(d)
}

// forward dials dst, replays what was peeked and splices both ways. A
// failed dial is logged at most once a second per sandbox, with the count
// of those not logged (a sandbox dialling dead addresses in a loop must
// not fill the daemon's log).
func (p *Proxy) forward(ctx context.Context, c *net.TCPConn, sandboxID string, dst netip.AddrPort, peeked []byte, log *slog.Logger) {
	dctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	up, err := p.cfg.Dial(dctx, "tcp", dst.String())
	cancel()
	if err != nil {
		if ok, n := p.dialFails.Allow(sandboxID, time.Now()); ok {
			log.Info("dialing allowed destination", "dst", dst, "err", err, "failed_dials", n)
		}
		c.SetLinger(0) // a reset, as the destination would have sent
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { up.Close() })
	defer stop()
	if len(peeked) > 0 {
		up.SetWriteDeadline(time.Now().Add(p.cfg.IdleTimeout))
		if _, err := up.Write(peeked); err != nil {
			log.Info("replaying the first bytes", "dst", dst, "err", err)
			return
		}
	}
	splice(c, up, p.cfg.IdleTimeout)
}

// addrPortOf returns a TCP address as an AddrPort, IPv4-mapped addresses
// unmapped.
func addrPortOf(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	if t, ok := a.(*net.TCPAddr); ok {
		ap = t.AddrPort()
	} else if x, err := netip.ParseAddrPort(a.String()); err == nil {
		ap = x
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
