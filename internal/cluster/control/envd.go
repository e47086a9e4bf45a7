package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
)

// The headers the e2b SDK names a sandbox and its port with on every
// envd request (as internal/e2b/envd reads them).
const (
	envdSandboxHeader = "E2b-Sandbox-Id"
	envdPortHeader    = "E2b-Sandbox-Port"
)

// envdRoute is the sandbox (and port, "" for envd's own) a request to
// the envd face names: the E2b-Sandbox-Id and E2b-Sandbox-Port headers,
// or a Host of the form <port>-<id>.<domain>.
func envdRoute(r *http.Request) (id, port string, err error) {
	id, port = r.Header.Get(envdSandboxHeader), r.Header.Get(envdPortHeader)
	if id == "" {
		host := r.Host
		if i := strings.IndexByte(host, '.'); i > 0 {
			host = host[:i]
		}
		p, rest, ok := strings.Cut(host, "-")
		if !ok || rest == "" {
			return "", "", errdefs.Invalid(envdSandboxHeader, "no sandbox named: send the E2b-Sandbox-Id and E2b-Sandbox-Port headers or a Host of <port>-<sandbox id>.<domain>")
		}
		id, port = rest, p
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", "", errdefs.Invalid(envdPortHeader, "%q is not a TCP port", port)
		}
	}
	if len(id) > 128 {
		return "", "", errdefs.Invalid(envdSandboxHeader, "longer than 128 bytes")
	}
	return id, port, nil
}

// EnvdHandler is the control plane's envd face: each request goes, as it
// came, to the envd face of the node that runs the sandbox it names (the
// node registered that face's address). The access token or signature
// it carries is the sandbox's, which the node checks; the control plane
// adds no credential. Connect's server streams pass as written. A
// sandbox the cluster does not run is a 502 in envd's shape, which the
// e2b SDK reads as a sandbox gone.
func (s *Server) EnvdHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, port, err := envdRoute(r)
		if err != nil && isSignedFiles(r) {
			if !r.URL.Query().Has("signature_expiration") {
				writeJSON(w, http.StatusUnauthorized, e2bErrorBody{Code: http.StatusUnauthorized, Message: "signature_expiration is required: a signed URL that never expires is refused"})
				return
			}
			// A signed URL names no sandbox: the nodes say whose it is.
			if id, err = s.signedBy(r); err == nil && id == "" {
				writeJSON(w, http.StatusUnauthorized, e2bErrorBody{Code: http.StatusUnauthorized, Message: "invalid signature"})
				return
			}
		}
		if err != nil {
			s.e2bError(w, err)
			return
		}
		target, err := s.envdTarget(r.Context(), id)
		if err != nil {
			if errdefs.HTTPStatus(err) >= 500 {
				s.log.InfoContext(r.Context(), "envd request for a sandbox no node serves", "op", "cluster", "sandbox", id, "err", err)
			}
			writeJSON(w, http.StatusBadGateway, e2bErrorBody{Code: http.StatusBadGateway, Message: err.Error()})
			return
		}
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = target.Host
				// The route travels in the headers, whichever form it
				// came in (the Host is the node's now).
				pr.Out.Header.Set(envdSandboxHeader, id)
				if port != "" {
					pr.Out.Header.Set(envdPortHeader, port)
				}
				pr.Out.Header.Del(nodeauth.Header)
			},
			Transport:     s.client.Transport,
			FlushInterval: -1,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if errors.Is(err, context.Canceled) {
					return
				}
				writeJSON(w, http.StatusBadGateway, e2bErrorBody{Code: http.StatusBadGateway, Message: fmt.Sprintf("sandbox %s: its node does not answer: %v", id, err)})
			},
		}
		fullDuplex(w)
		rp.ServeHTTP(w, r)
	})
}

// envdTarget is the envd face of the node that runs sandbox id.
func (s *Server) envdTarget(ctx context.Context, id string) (*url.URL, error) {
	p, err := s.st.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	switch {
	case p.State == store.Lost:
		return nil, lostError(p)
	case p.Node.EnvdAddress == "":
		return nil, fmt.Errorf("%w: sandbox %s: its node %s serves no envd face (--envd-listen)", errdefs.ErrUnavailable, id, p.Node.ID)
	}
	u, err := url.Parse(p.Node.EnvdAddress)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%w: node %s's envd address %q is not an http(s) URL", errdefs.ErrUnavailable, p.Node.ID, p.Node.EnvdAddress)
	}
	return u, nil
}
