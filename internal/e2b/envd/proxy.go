package envd

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"time"

	"corral/internal/errdefs"
	"corral/internal/websession"
)

// trafficTokenHeader is E2B's header for a sandbox's non-public ports;
// Corral's port token is accepted in it (and in its own header).
const (
	trafficTokenHeader = "E2b-Traffic-Access-Token"
	portTokenHeader    = "X-Corral-Port-Token"
)

// proxyPort forwards a request for another port of the sandbox to that
// port, through the manager's exposed-port path: the port must be exposed,
// and unless public the caller holds the sandbox's envd access token or
// its port token.
func (s *Server) proxyPort(w http.ResponseWriter, r *http.Request, id string, port int) {
	admin := false
	if sb, err := s.record(r.Context(), id); err == nil {
		got := r.Header.Get(accessTokenHeader)
		admin = got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.m.AccessToken(sb))) == 1
	}
	token := r.Header.Get(portTokenHeader)
	if token == "" {
		token = r.Header.Get(trafficTokenHeader)
	}
	if err := s.m.Ports().Access(id, port, token, admin); err != nil {
		s.fail(w, r, err)
		return
	}
	remote := r.RemoteAddr
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = fmt.Sprintf("localhost:%d", port)
			pr.Out.Host = pr.Out.URL.Host
			for _, h := range []string{accessTokenHeader, portTokenHeader, trafficTokenHeader, sandboxIDHeader, sandboxPortHeader, "Authorization"} {
				pr.Out.Header.Del(h)
			}
			websession.StripCookies(pr.Out.Header)
			pr.SetXForwarded()
		},
		ModifyResponse: func(resp *http.Response) error {
			websession.DropSetCookies(resp.Header, false)
			return nil
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return s.m.Ports().Dial(ctx, id, port, remote, r.Method+" "+r.URL.Path)
			},
			DisableKeepAlives:     true,
			ResponseHeaderTimeout: 5 * time.Minute,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrFailedPrecondition) && !errors.Is(err, errdefs.ErrResourceExhausted) {
				err = &statusError{http.StatusBadGateway, fmt.Sprintf("port %d of sandbox %s: %v", port, id, err)}
			}
			s.fail(w, r, err)
		},
	}
	rp.ServeHTTP(w, r)
}
