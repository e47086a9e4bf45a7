package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Header injection. A sandbox with header rules (Interception) has its
// TLS connections to the rules' hosts terminated by the proxy: a
// connection is a candidate only when the daemon's resolver gave its
// destination to the sandbox for one of those hosts; its first bytes must
// then be a TLS ClientHello carrying that very name (SNI). The proxy
// answers with a certificate for the name signed by the sandbox's own CA,
// and connects upstream to the original destination verifying the real
// certificate for the name (UpstreamRoots, or the system's). Each request
// on the connection must be for that name (else 421); the headers of the
// rules that allow its port and method are set on it, replacing any the
// sandbox sent, and it goes upstream. A TRACE, TRACK or CONNECT never gets
// them (neverInjected), whatever a rule says. Plain HTTP to a ruled host is
// spliced untouched and reported as skipped: a secret never crosses the
// network in clear text. Every other connection is spliced as before.

// Interception is what the proxy intercepts for one sandbox.
type Interception struct {
	// Hosts are the names whose connections are terminated (lowercase,
	// no trailing dot).
	Hosts []string
	// Cert returns the certificate the sandbox is shown for host.
	Cert func(host string) (*tls.Certificate, error)
	// Headers returns the headers to set on a request over TLS to host on
	// port with method, read at the time of the request (none: the
	// request goes on without). An error refuses the request (502).
	Headers func(host string, port int, method string) ([]Header, error)
}

// Header is one header to set. Value never reaches a log or an error.
type Header struct {
	Name, Value string
}

// Injection reports requests whose headers the proxy set (or refused to),
// at most once a second per sandbox, host and header (Count says how many
// requests a report stands for). It never carries a value.
type Injection struct {
	SandboxID string
	Host      string
	Headers   []string
	Count     int
	Err       string // why the request was refused, if it was
	Skipped   string // why requests went on without the headers, if they did
}

// intercept decides whether a connection to dst is one to terminate: the
// names the resolver gave the sandbox for dst that have rules.
func (p *Proxy) interceptFor(sandboxID string, dst netip.Addr) (*Interception, []string) {
	if p.cfg.Intercept == nil {
		return nil, nil
	}
	ic := p.cfg.Intercept(sandboxID)
	if ic == nil || len(ic.Hosts) == 0 {
		return nil, nil
	}
	var names []string
	for _, n := range p.cfg.Resolved(sandboxID, dst) {
		n = strings.TrimSuffix(strings.ToLower(n), ".")
		if slices.Contains(ic.Hosts, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	return ic, names
}

// terminate serves the sandbox's TLS connection c (whose first bytes,
// already read, are peeked) as the named host, injecting headers, and
// sends each request upstream to dst over TLS.
func (p *Proxy) terminate(ctx context.Context, c net.Conn, peeked []byte, sandboxID, name string, dst netip.AddrPort, ic *Interception, log *slog.Logger) {
	conn := &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(peeked), c)}
	cert, err := ic.Cert(name)
	if err != nil {
		log.Warn("no certificate for an intercepted host", "host", name, "err", err)
		return
	}
	tc := tls.Server(conn, &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return cert, nil
		},
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	c.SetDeadline(time.Now().Add(p.cfg.PeekTimeout))
	if err := tc.HandshakeContext(ctx); err != nil {
		log.Info("tls handshake with the sandbox", "host", name, "err", err)
		return
	}
	c.SetDeadline(time.Time{})
	tr := p.upstreamTransport(name, dst)
	defer tr.CloseIdleConnections()
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "https", name
			r.Out.Host = r.In.Host
		},
		Transport: &injectTransport{base: tr, p: p, sandboxID: sandboxID, host: name, port: int(dst.Port()), ic: ic},
		ErrorLog:  stdlog.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var ie *injectError
			if errors.As(err, &ie) {
				http.Error(w, "corral: "+ie.msg, ie.status)
				return
			}
			log.Info("intercepted request upstream", "host", name, "err", err)
			http.Error(w, "corral: the upstream request failed", http.StatusBadGateway)
		},
	}
	serveOne(ctx, tc, rp, p.cfg.IdleTimeout)
}

// upstreamTransport dials dst for every request, verifying for TLS the
// real certificate of name.
func (p *Proxy) upstreamTransport(name string, dst netip.AddrPort) *http.Transport {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		defer cancel()
		return p.cfg.Dial(dctx, "tcp", dst.String())
	}
	return &http.Transport{
		DialContext: dial,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(raw, &tls.Config{ServerName: name, RootCAs: p.cfg.UpstreamRoots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
			if err := tc.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			return tc, nil
		},
		MaxIdleConnsPerHost:   1,
		IdleConnTimeout:       p.cfg.IdleTimeout,
		TLSHandshakeTimeout:   p.cfg.DialTimeout,
		ResponseHeaderTimeout: p.cfg.IdleTimeout,
	}
}

// injectTransport checks each request's host and sets the rules' headers.
type injectTransport struct {
	base      http.RoundTripper
	p         *Proxy
	sandboxID string
	host      string
	port      int
	ic        *Interception
}

type injectError struct {
	status int
	msg    string
}

func (e *injectError) Error() string { return e.msg }

func (t *injectTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if h, err := hostOnly(r.Host); err != nil || h != t.host {
		return nil, &injectError{http.StatusMisdirectedRequest, "this connection is for " + t.host + " only"}
	}
	if why, never := neverInjected(r.Method); never {
		t.p.injected(Injection{SandboxID: t.sandboxID, Host: t.host, Skipped: why})
		return t.base.RoundTrip(r)
	}
	hs, err := t.ic.Headers(t.host, t.port, r.Method)
	if err != nil {
		t.p.injected(Injection{SandboxID: t.sandboxID, Host: t.host, Err: err.Error()})
		return nil, &injectError{http.StatusBadGateway, "a secret for " + t.host + " is unavailable"}
	}
	if len(hs) == 0 {
		t.p.injected(Injection{SandboxID: t.sandboxID, Host: t.host, Skipped: fmt.Sprintf("no rule allows %s on port %d", r.Method, t.port)})
		return t.base.RoundTrip(r)
	}
	names := make([]string, 0, len(hs))
	for _, h := range hs {
		r.Header.Set(h.Name, h.Value)
		names = append(names, http.CanonicalHeaderKey(h.Name))
	}
	t.p.injected(Injection{SandboxID: t.sandboxID, Host: t.host, Headers: names})
	return t.base.RoundTrip(r)
}

// neverInjected says whether a request with method (in any case) goes on
// without the rules' headers whatever they name, and why: a TRACE or
// TRACK is answered with the request itself, so the server would hand the
// secret back to the sandbox; a CONNECT is a tunnel, not a request to the
// host. secrets.NeverMethod refuses them in a rule; this package keeps its
// own list (it imports no secrets) so that no rule, however it was
// stored, sends one.
func neverInjected(method string) (string, bool) {
	switch m := strings.ToUpper(method); m {
	case "TRACE", "TRACK":
		return m + " echoes the request back: never given a secret header", true
	case http.MethodConnect:
		return "CONNECT opens a tunnel: never given a secret header", true
	}
	return "", false
}

// injected reports inj within the report interval.
func (p *Proxy) injected(inj Injection) {
	if p.cfg.Injected == nil {
		return
	}
	key := inj.SandboxID + " " + inj.Host + " " + strings.Join(inj.Headers, ",") + " " + inj.Err + " " + inj.Skipped
	if ok, n := p.injections.Allow(key, time.Now()); ok {
		inj.Count = n
		p.cfg.Injected(inj)
	}
}

// serveOne serves HTTP on the one connection c until it closes.
func serveOne(ctx context.Context, c net.Conn, h http.Handler, idle time.Duration) {
	l := &oneListener{c: c, done: make(chan struct{})}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: DefaultPeekTimeout,
		IdleTimeout:       idle,
		ErrorLog:          stdlog.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				l.Close()
			}
		},
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	srv.Serve(l)
	<-l.done
	srv.Close()
}

// oneListener accepts c once, then blocks until closed.
type oneListener struct {
	c    net.Conn
	once sync.Once
	mu   sync.Mutex
	used bool
	done chan struct{}
}

func (l *oneListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.used {
		l.used = true
		l.mu.Unlock()
		return l.c, nil
	}
	l.mu.Unlock()
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneListener) Addr() net.Addr { return l.c.LocalAddr() }

// replayConn reads the peeked bytes before the rest of the connection.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(b []byte) (int, error) { return c.r.Read(b) }
