package control

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// e2bKeyPrefix begins an E2B API key: the prefix, then the control
// plane's API token (as internal/e2b's KeyPrefix on a daemon; this
// package does not import the face it fronts).
const e2bKeyPrefix = "e2b_"

// e2bRoutes is E2B's control API, mounted under /e2b with the prefix
// stripped. A create is placed like a native one (place) and carried out
// by the node's own E2B face, so the translation from E2B's create to a
// sandbox (templates, metadata, lifecycle, network) has one source of
// truth: the node's. Calls by sandbox id go to its node's /e2b; lists
// merge the nodes' (e2blist.go); snapshots and forks are the cluster's
// (e2bsnap.go). Any other path answers 400 not_supported.
func (s *Server) e2bRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sandboxes", s.e2bAuth(s.e2bCreate))
	mux.HandleFunc("POST /v2/sandboxes", s.e2bAuth(s.e2bCreate))
	mux.HandleFunc("GET /sandboxes", s.e2bAuth(s.e2bListV1))
	mux.HandleFunc("GET /v2/sandboxes", s.e2bAuth(s.e2bListV2))
	// Forks and snapshots go through the cluster's records (e2bsnap.go),
	// not the node's E2B face, which would make them outside them.
	mux.HandleFunc("GET /sandboxes/metrics", s.e2bAuth(s.e2bMetricsMany))
	mux.HandleFunc("POST /sandboxes/{id}/fork", s.e2bAuth(s.e2bFork))
	mux.HandleFunc("POST /sandboxes/{id}/snapshots", s.e2bAuth(s.e2bSnapshot))
	mux.HandleFunc("GET /snapshots", s.e2bAuth(s.e2bListSnapshots))
	mux.HandleFunc("DELETE /templates/{templateID}", s.e2bAuth(s.e2bDeleteTemplate))
	mux.HandleFunc("/sandboxes/{id}", s.e2bAuth(s.e2bProxy))
	mux.HandleFunc("/sandboxes/{id}/{rest...}", s.e2bAuth(s.e2bProxy))
	mux.HandleFunc("/v2/sandboxes/{id}/{rest...}", s.e2bAuth(s.e2bProxy))
	mux.HandleFunc("/", s.e2bAuth(s.e2bNotServed))
	return mux
}

func (s *Server) e2bNotServed(w http.ResponseWriter, r *http.Request) {
	s.e2bError(w, fmt.Errorf("%w: %s /e2b%s is not served by the control plane yet (docs/CLUSTER.md)", errdefs.ErrNotSupported, r.Method, r.URL.Path))
}

// e2bAuth requires X-API-KEY: e2b_<the control plane's token>.
func (s *Server) e2bAuth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-KEY")
		if key == "" {
			s.e2bError(w, fmt.Errorf("%w: missing X-API-KEY header (%s followed by the control plane's token)", errdefs.ErrUnauthenticated, e2bKeyPrefix))
			return
		}
		tok, ok := strings.CutPrefix(key, e2bKeyPrefix)
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) != 1 {
			s.e2bError(w, fmt.Errorf("%w: invalid API key (want %s followed by the control plane's token)", errdefs.ErrUnauthenticated, e2bKeyPrefix))
			return
		}
		next(w, r)
	}
}

// e2bErrorBody is E2B's error shape.
type e2bErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// e2bError answers err in E2B's shape, its kind's status as the code. An
// internal error's message (the database's words) is not shown.
func (s *Server) e2bError(w http.ResponseWriter, err error) {
	status := errdefs.HTTPStatus(err)
	msg := err.Error()
	if status == http.StatusInternalServerError {
		s.log.Warn("control plane e2b request failed", "op", "cluster", "err", err)
		msg = "internal error"
	}
	writeJSON(w, status, e2bErrorBody{Code: status, Message: msg})
}

// e2bCreate places an E2B create: room for a sandbox of the spec's
// defaults (E2B's create names no resources) on a node with the E2B
// runtime, then the node's /e2b makes it. A templateID that names a
// snapshot the cluster knows asks for the snapshot's runtime, version and
// resources instead, and the snapshot is sent to the chosen node first;
// one that names an image another node holds has it fetched first.
func (s *Server) e2bCreate(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCreateBody))
	if err != nil {
		s.e2bError(w, errdefs.Invalid("body", "%v", err))
		return
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		s.e2bError(w, errdefs.Invalid("body", "want a JSON object"))
		return
	}
	rt := s.cfg.E2BRuntime
	if rt == "" {
		rt = sandbox.Runtimes[0]
	}
	req := store.Request{Runtime: rt, CPUMilli: milli(sandbox.DefaultCPU, sandbox.DefaultCPU), MemoryMB: sandbox.DefaultMemoryMB,
		DiskMB: sandbox.DefaultDiskMB, FreshWithin: s.cfg.LostAfter}
	c := createCall{req: req, path: "/e2b" + r.URL.Path, body: raw, idOf: e2bID}
	var tmpl string
	_ = json.Unmarshal(fields["templateID"], &tmpl) // the node refuses a bad one
	if c.locs, err = s.e2bSnapshotTemplate(r.Context(), tmpl, &c.req); err != nil {
		s.e2bError(w, err)
		return
	}
	if c.locs == nil {
		c.image = tmpl // an image the cluster knows is fetched first ("base" is every node's)
	}
	a, err := s.place(r, c)
	if err != nil {
		s.e2bError(w, err)
		return
	}
	relay(w, a)
}

// e2bID reads an E2B create's answer (E2B sandboxes have no name).
func e2bID(body []byte) (id, name string) {
	var sb struct {
		SandboxID string `json:"sandboxID"`
	}
	_ = json.Unmarshal(body, &sb)
	return sb.SandboxID, ""
}

// e2bProxy passes an E2B call on sandbox {id} to its node's /e2b, with
// the node's credential instead of the caller's key; a kill that ends
// the sandbox gives its room back.
func (s *Server) e2bProxy(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, target, cred, err := s.placedTarget(r.Context(), id)
	if err != nil {
		s.e2bError(w, err)
		return
	}
	// (JoinPath keeps an empty base path relative: "e2b".)
	target = target.JoinPath("/e2b")
	if !strings.HasPrefix(target.Path, "/") {
		target.Path = "/" + target.Path
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Del("X-API-KEY")
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Set(nodeauth.Header, cred)
		},
		Transport:     s.client.Transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			s.e2bError(w, fmt.Errorf("%w: sandbox %s: its node %s does not answer: %v", errdefs.ErrUnavailable, id, p.Node.ID, err))
		},
		ModifyResponse: func(resp *http.Response) error {
			if r.Method == http.MethodDelete && r.URL.Path == "/sandboxes/"+id && resp.StatusCode == http.StatusNoContent {
				s.noteDelete(context.WithoutCancel(r.Context()), p.ID, http.StatusOK)
			}
			return nil
		},
	}
	fullDuplex(w)
	rp.ServeHTTP(w, r)
}
