package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"corral/internal/errdefs"
	"corral/internal/websession"
)

// Exposed ports. Either the daemon's API token or the sandbox's port token
// opens a non-public port; the port token comes in the X-Corral-Port-Token
// header, as a bearer token, or as the corral_token query parameter (for
// browsers; it is stripped before the request reaches the sandbox).
const (
	portTokenHeader = "X-Corral-Port-Token"
	portTokenQuery  = "corral_token"
	tunnelProtocol  = "corral-tcp"
)

// portRequest authorises a request for an exposed port and returns the
// sandbox id and port.
func (s *Server) portRequest(r *http.Request) (string, int, error) {
	id := r.PathValue("id")
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		return "", 0, errdefs.Invalid("port", "%q is not a TCP port", r.PathValue("port"))
	}
	token := r.Header.Get(portTokenHeader)
	if token == "" {
		token = r.URL.Query().Get(portTokenQuery)
	}
	admin := false
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && token == "" {
		admin = subtle.ConstantTimeCompare([]byte(bearer), []byte(s.token)) == 1
		token = bearer
	}
	return id, port, s.m.Ports().Access(id, port, token, admin)
}

// proxyPort forwards HTTP (WebSocket upgrades included) to an exposed
// port, for programs: a browser is sent to the ports origin (origin.go).
func (s *Server) proxyPort(w http.ResponseWriter, r *http.Request) {
	id, port, err := s.portRequest(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	path := "/" + r.PathValue("path")
	if websession.FromBrowser(r) {
		s.toOrigin(w, r, id, port, path)
		return
	}
	s.forward(w, r, id, port, path, true)
}

// forward proxies r to port of sandbox id at path. On the API's origin
// (apiOrigin) the response may set no cookie at all and is sandboxed by
// its Content-Security-Policy, should a browser ever render it; on the
// ports origin only Corral's cookie names are kept from the sandbox.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, id string, port int, path string, apiOrigin bool) {
	remote := r.RemoteAddr
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = fmt.Sprintf("localhost:%d", port)
			pr.Out.URL.Path, pr.Out.URL.RawPath = path, ""
			q := pr.Out.URL.Query()
			q.Del(portTokenQuery)
			pr.Out.URL.RawQuery = q.Encode()
			pr.Out.Host = pr.Out.URL.Host
			StripForSandbox(pr.Out.Header)
			pr.SetXForwarded()
		},
		ModifyResponse: func(resp *http.Response) error {
			websession.DropSetCookies(resp.Header, apiOrigin)
			if apiOrigin {
				resp.Header.Set("Content-Security-Policy", "sandbox")
			}
			return nil
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return s.m.Ports().Dial(ctx, id, port, remote, r.Method+" "+path)
			},
			DisableKeepAlives:     true,
			ResponseHeaderTimeout: 5 * time.Minute,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, errdefs.ErrFailedPrecondition) &&
				!errors.Is(err, errdefs.ErrResourceExhausted) {
				err = fmt.Errorf("%w: port %d: %v", errdefs.ErrUnavailable, port, err)
			}
			s.writeError(w, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// tunnelPort turns the HTTP connection into a raw TCP stream to an exposed
// port: the client sends "Connection: Upgrade" and "Upgrade: corral-tcp",
// gets 101, and then speaks the port's own protocol.
func (s *Server) tunnelPort(w http.ResponseWriter, r *http.Request) {
	id, port, err := s.portRequest(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), tunnelProtocol) {
		s.writeError(w, errdefs.Invalid("Upgrade", "a tunnel needs the header Upgrade: %s", tunnelProtocol))
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		s.writeError(w, fmt.Errorf("%w: this connection cannot be upgraded (HTTP/2?)", errdefs.ErrNotSupported))
		return
	}
	// Not r.Context(): the server cancels that when the caller half-closes
	// (its background read sees EOF), which would cut the stream before
	// the sandbox answers what the caller sent. up.Close ends it instead.
	up, err := s.m.Ports().Dial(context.WithoutCancel(r.Context()), id, port, r.RemoteAddr, "tunnel")
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer up.Close()
	down, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	if _, err := io.WriteString(down, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+tunnelProtocol+"\r\n\r\n"); err != nil {
		return
	}
	splice(down, buf.Reader, up)
}

// splice copies both ways until both directions are done, half-closing
// each side as its source ends.
func splice(down net.Conn, downReader io.Reader, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, downReader)
		closeWrite(up)
	}()
	_, _ = io.Copy(down, up)
	closeWrite(down)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
