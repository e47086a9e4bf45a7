package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
)

// proxy passes a call on sandbox {id} to the node that runs it. With
// credential, the caller's token (already checked) is replaced by the
// node's credential; without (an exposed port: the port token is the
// node's to check), the request goes as it came. Streams pass through
// as they are written (FlushInterval -1); upgrades (PTY, tunnels) are
// spliced; TCP's own flow control is the backpressure.
func (s *Server) proxy(credential bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		p, target, cred, err := s.placedTarget(r.Context(), id)
		if err != nil {
			s.writeError(w, err)
			return
		}
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = target.Host
				pr.Out.Header.Del(nodeauth.Header)
				if credential {
					pr.Out.Header.Del("Authorization")
					pr.Out.Header.Set(nodeauth.Header, cred)
				}
			},
			Transport:     s.client.Transport,
			FlushInterval: -1,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if errors.Is(err, context.Canceled) {
					return
				}
				s.writeError(w, fmt.Errorf("%w: sandbox %s: its node %s does not answer: %v", errdefs.ErrUnavailable, id, p.Node.ID, err))
			},
			ModifyResponse: func(resp *http.Response) error {
				if r.Method == http.MethodDelete && r.URL.Path == "/v1/sandboxes/"+id {
					s.noteDelete(context.WithoutCancel(r.Context()), p.ID, resp.StatusCode)
				}
				if changesRecord(r.Method, r.URL.Path, id) {
					s.noteRecord(context.WithoutCancel(r.Context()), p.ID, resp)
				}
				return nil
			},
		}
		fullDuplex(w)
		rp.ServeHTTP(w, r)
	}
}

// placedTarget is sandbox id's placement, its node's API base URL and
// the credential that opens it; a lost sandbox is lostError.
func (s *Server) placedTarget(ctx context.Context, id string) (store.Placement, *url.URL, string, error) {
	p, err := s.st.Lookup(ctx, id)
	if err != nil {
		return p, nil, "", err
	}
	if p.State == store.Lost {
		return p, nil, "", lostError(p)
	}
	target, cred, err := s.nodeTarget(p.Node)
	return p, target, cred, err
}

// lostError is the answer for a sandbox whose node was lost.
func lostError(p store.Placement) error {
	return fmt.Errorf("%w: sandbox %s is lost: its node %s stopped answering and was marked lost at %s; the cluster gave the sandbox up",
		errdefs.ErrFailedPrecondition, p.ID, p.Node.ID, p.Updated.UTC().Format("2006-01-02T15:04:05Z"))
}

// nodeTarget is node n's API base URL and the credential that opens it,
// checked against the hash the node registered (a control plane given
// another cluster's join token finds out here, not at the node).
func (s *Server) nodeTarget(n store.Node) (*url.URL, string, error) {
	u, err := url.Parse(n.Address)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, "", fmt.Errorf("%w: node %s's address %q is not an http(s) URL", errdefs.ErrUnavailable, n.ID, n.Address)
	}
	cred := nodeauth.Credential(s.join, n.ID, n.CredentialNonce)
	if !nodeauth.Equal(nodeauth.Hash(cred), n.CredentialHash) {
		return nil, "", fmt.Errorf("%w: node %s's credential does not derive from this control plane's join token (a different --join-token-file?)", errdefs.ErrUnavailable, n.ID)
	}
	return u, cred, nil
}

// noteDelete records a delete's answer: 200 is a sandbox gone from its
// node, whose room is free again; 202 (?wait=false) one being removed,
// which the node still holds until its heartbeat no longer lists it.
func (s *Server) noteDelete(ctx context.Context, id string, status int) {
	var err error
	switch status {
	case http.StatusOK:
		err = s.st.End(ctx, id)
	case http.StatusAccepted:
		err = s.st.Ending(ctx, id)
	}
	if err != nil {
		s.log.Warn("recording a sandbox's removal", "op", "cluster", "sandbox", id, "err", err)
	}
}

// fullDuplex lets a proxied request's body still be read after the
// node's answer has begun to reach the caller. Without it an HTTP/1.1
// server closes the body once the answer is flushed, and a stream whose
// node answers before the request's body is all sent (a Connect server
// stream does, at once) loses that body: the copy to the node fails, the
// node's connection is closed and the caller's stream is cut.
func fullDuplex(w http.ResponseWriter) {
	_ = http.NewResponseController(w).EnableFullDuplex()
}
