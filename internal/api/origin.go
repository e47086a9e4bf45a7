package api

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/websession"
)

// The ports origin: exposed ports served on a listener of their own
// (--ports-listen), each sandbox port under a host of its own,
// <port>-<id>.<domain>, so a page a sandbox serves is never of the
// console's or the API's origin and never receives their cookies. The
// API listener's /v1/sandboxes/{id}/ports/... path stays for programs
// (the CLI, SDKs, a control plane's link to its node); a browser sent
// there is redirected here (origin guard below).

// PortsOrigin is where exposed ports are served for browsers: domain is
// the host (with the port browsers reach it on, if not the scheme's)
// under which each port gets <port>-<id>.<domain>; scheme is http or
// https.
type PortsOrigin struct {
	Scheme string
	Domain string
}

// URL is the browser URL of port of sandbox id on o, path included.
func (o PortsOrigin) URL(id string, port int, path string) string {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return fmt.Sprintf("%s://%d-%s.%s%s", o.Scheme, port, id, o.Domain, path)
}

// SetPortsOrigin makes the API give each exposed port its browser URL on
// o and send browsers there.
func (s *Server) SetPortsOrigin(o PortsOrigin) { s.ports = &o }

// ParsePortsHost is the sandbox id and port a Host of
// <port>-<id>.<domain>[:p] names; domain is compared without its port
// and case-insensitively.
func ParsePortsHost(host, domain string) (string, int, error) {
	h := strings.ToLower(hostOnly(host))
	d := strings.ToLower(hostOnly(domain))
	label, ok := strings.CutSuffix(h, "."+d)
	if !ok || label == "" || strings.Contains(label, ".") {
		return "", 0, errdefs.Invalid("Host", "%q is not <port>-<sandbox id>.%s", host, d)
	}
	p, id, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(p)
	if !ok || err != nil || port < 1 || port > 65535 || p != strconv.Itoa(port) {
		return "", 0, errdefs.Invalid("Host", "%q does not start with a TCP port and a dash", host)
	}
	if id == "" || len(id) > 128 || strings.IndexFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
	}) >= 0 {
		return "", 0, errdefs.Invalid("Host", "%q does not name a sandbox id", host)
	}
	return id, port, nil
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// PortsHandler serves the ports origin: the Host names the sandbox and
// port; a public port is open, another needs the sandbox's port token (in
// X-Corral-Port-Token, as a bearer, in ?corral_token= once, then in the
// origin's own cookie) or the API token as a bearer.
func (s *Server) PortsHandler(domain string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, port, err := ParsePortsHost(r.Host, domain)
		if err != nil {
			s.writeError(w, err)
			return
		}
		token, admin, fromQuery := s.originToken(r)
		if err := s.m.Ports().Access(id, port, token, admin); err != nil {
			s.writeError(w, err)
			return
		}
		if fromQuery && websession.FromBrowser(r) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			// A browser keeps the token in this origin's cookie, for the
			// page's own requests, and drops it from the address bar.
			// (A program's ?corral_token= is stripped before the sandbox.)
			http.SetCookie(w, &http.Cookie{Name: websession.PortCookie, Value: token, Path: "/", HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
			u := *r.URL
			q := u.Query()
			q.Del(portTokenQuery)
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		s.forward(w, r, id, port, r.URL.Path, false)
	})
}

// originToken is the port token a ports-origin request carries and
// whether it is the API token; fromQuery says it came as ?corral_token=.
func (s *Server) originToken(r *http.Request) (token string, admin, fromQuery bool) {
	if token = r.Header.Get(portTokenHeader); token != "" {
		return token, false, false
	}
	if token = r.URL.Query().Get(portTokenQuery); token != "" {
		return token, false, true
	}
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && bearer != "" {
		return bearer, subtle.ConstantTimeCompare([]byte(bearer), []byte(s.token)) == 1, false
	}
	if c, err := r.Cookie(websession.PortCookie); err == nil {
		return c.Value, false, false
	}
	return "", false, false
}

// toOrigin answers a browser's request for a port on the API listener:
// a redirect to the same path on the ports origin, or, with none, a
// refusal naming the flag. Never the sandbox's page on the API's origin.
func (s *Server) toOrigin(w http.ResponseWriter, r *http.Request, id string, port int, path string) {
	if s.ports == nil {
		s.writeError(w, fmt.Errorf("%w: exposed ports are not served to browsers on the API's origin (the console's); start the daemon with --ports-listen to give them their own", errdefs.ErrPermissionDenied))
		return
	}
	u := s.ports.URL(id, port, path)
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, u, http.StatusTemporaryRedirect)
}

// StripForSandbox removes from a request headed to a sandbox port what
// only Corral may see: the Authorization header, the port-token header
// and Corral's cookies. The envd face and a control plane use it too.
func StripForSandbox(h http.Header) {
	h.Del("Authorization")
	h.Del(portTokenHeader)
	websession.StripCookies(h)
}

// StripFromSandbox removes from a sandbox port's response any Set-Cookie
// for one of Corral's cookies.
func StripFromSandbox(h http.Header) { websession.DropSetCookies(h, false) }
