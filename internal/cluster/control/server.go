package control

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/mcp"
	"corral/internal/reqid"
	"corral/internal/websession"
	"corral/pkg/apiv1"
)

// Server is the control plane's HTTP API.
type Server struct {
	st     *store.Store
	token  string
	join   string
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	client *http.Client // to nodes
	met    *controlMetrics
	drains *drainer // the leader's moves off draining nodes (drain.go)
}

func newServer(st *store.Store, token, join string, cfg Config) *Server {
	s := &Server{st: st, token: token, join: join, cfg: cfg, log: cfg.Log, mux: http.NewServeMux(), client: &http.Client{Transport: nodeTransport(st, cfg)}, met: newControlMetrics(st), drains: newDrainer()}
	s.routes()
	return s
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	s.mux.HandleFunc("GET /v1/version", s.auth(s.version))
	s.mux.HandleFunc("GET /v1/cluster/nodes", s.auth(s.nodes))
	s.mux.HandleFunc("POST /v1/cluster/nodes/{id}/drain", s.auth(s.drain(true)))
	s.mux.HandleFunc("POST /v1/cluster/nodes/{id}/undrain", s.auth(s.drain(false)))
	s.imageRoutes()
	s.volumeRoutes()
	s.secretRoutes()
	s.mux.HandleFunc("POST /v1/sandboxes", s.auth(s.create))
	s.mux.HandleFunc("GET /v1/sandboxes", s.auth(s.list))
	s.mux.HandleFunc("GET /v1/usage", s.auth(s.usage))
	// MCP's tools call this control plane's own API in process, so their
	// sandboxes are placed and reached as any caller's.
	s.mux.Handle("/mcp", mcp.HTTPHandler(mcp.InProcessClient(s.mux, s.token),
		mcp.Options{Version: s.cfg.Version, MaxTimeout: s.cfg.MCPMaxTimeout}, s.token))
	s.mux.HandleFunc("GET /v1/audit", s.auth(s.auditPage))
	s.mux.HandleFunc("GET /v1/audit/verify", s.auth(s.auditVerify))
	s.mux.HandleFunc("GET /v1/audit/export", s.auth(s.auditExport))
	s.mux.HandleFunc("GET /metrics", s.auth(s.met.handler().ServeHTTP))
	// Exposed ports authorise with the sandbox's port token on the node.
	s.mux.HandleFunc("/v1/sandboxes/{id}/ports/{port}/{path...}", s.programsOnly(s.proxy(false)))
	s.mux.HandleFunc("GET /v1/sandboxes/{id}/tunnel/{port}", s.proxy(false))
	s.mux.HandleFunc("POST /v1/sandboxes/{id}/fork", s.auth(s.fork))
	s.mux.HandleFunc("POST /v1/sandboxes/{id}/snapshots/memory", s.auth(s.snapshotMemory))
	s.mux.HandleFunc("GET /v1/snapshots", s.auth(s.listSnapshots))
	s.mux.HandleFunc("GET /v1/snapshots/{ref}", s.auth(s.getSnapshot))
	s.mux.HandleFunc("DELETE /v1/snapshots/{ref}", s.auth(s.deleteSnapshot))
	s.mux.HandleFunc("/v1/sandboxes/{id}", s.auth(s.proxy(true)))
	s.mux.HandleFunc("/v1/sandboxes/{id}/{rest...}", s.auth(s.proxy(true)))
	// E2B's control API, with E2B's key and error shape (e2b.go).
	s.mux.Handle("/e2b/", http.StripPrefix("/e2b", s.e2bRoutes()))
	s.mux.HandleFunc("/", s.auth(s.notServed))
}

// programsOnly refuses a browser an exposed port on the control plane's
// API origin: a sandbox's page must never be of an API's origin. Browsers
// reach ports by host, <port>-<id>.<domain>, on the envd face
// (--envd-listen), which passes them on to the sandbox's node.
func (s *Server) programsOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if websession.FromBrowser(r) {
			s.writeError(w, fmt.Errorf("%w: exposed ports are not served to browsers on the API's origin; open <port>-<sandbox id>.<domain> on the control plane's --envd-listen", errdefs.ErrPermissionDenied))
			return
		}
		next(w, r)
	}
}

func (s *Server) notServed(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, fmt.Errorf("%w: %s %s is not served by the control plane yet (docs/CLUSTER.md)", errdefs.ErrNotSupported, r.Method, r.URL.Path))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || got == "" {
			s.writeError(w, fmt.Errorf("%w: missing bearer token (Authorization: Bearer <token>)", errdefs.ErrUnauthenticated))
			return
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
			s.writeError(w, fmt.Errorf("%w: wrong token", errdefs.ErrUnauthenticated))
			return
		}
		next(w, r)
	}
}

// version names the runtimes some ready node offers.
func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	ns, err := s.st.Nodes(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	v := apiv1.Version{Version: s.cfg.Version, Runtimes: []string{}}
	for _, n := range ns {
		if n.State != store.NodeReady {
			continue
		}
		for _, rt := range n.Runtimes {
			if !slices.Contains(v.Runtimes, rt) {
				v.Runtimes = append(v.Runtimes, rt)
			}
		}
	}
	slices.Sort(v.Runtimes)
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) nodes(w http.ResponseWriter, r *http.Request) {
	ns, err := s.st.Nodes(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	uses, err := s.st.Uses(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	fps, err := s.st.TLSFingerprints(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	drains, err := s.st.Drains(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.ClusterNodes{Nodes: []apiv1.ClusterNode{}}
	for _, n := range ns {
		c := toAPINode(n, uses[n.ID])
		c.TLSFingerprint = fps[n.ID]
		if d, ok := drains[n.ID]; ok && n.Draining {
			c.Drain = toAPIDrain(d)
		}
		out.Nodes = append(out.Nodes, c)
	}
	writeJSON(w, http.StatusOK, out)
}

// drain stops (on) or resumes placing sandboxes on node {id}; a drain
// also has the leader move its paused sandboxes (drain.go), and answers
// at once.
func (s *Server) drain(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, err := s.st.Drain(r.Context(), r.PathValue("id"), on)
		if err == nil && on {
			err = s.st.StartDrain(r.Context(), n.ID)
		} else if err == nil {
			err = s.st.StopDrain(r.Context(), n.ID)
		}
		if err != nil {
			s.writeError(w, err)
			return
		}
		s.log.InfoContext(r.Context(), "node drain changed", "op", "cluster", "node", n.ID, "draining", on)
		uses, err := s.st.Uses(r.Context())
		if err != nil {
			s.writeError(w, err)
			return
		}
		c := toAPINode(n, uses[n.ID])
		if on {
			c.Drain = toAPIDrain(store.DrainState{Node: n.ID})
		}
		writeJSON(w, http.StatusOK, c)
	}
}

func toAPINode(n store.Node, u store.Use) apiv1.ClusterNode {
	c := apiv1.ClusterNode{ID: n.ID, Address: n.Address, State: n.State, Draining: n.Draining, Runtimes: n.Runtimes, RuntimeVersions: n.RuntimeVersions, KVM: n.KVM,
		Labels: n.Labels, CPU: float64(n.CPUMilli) / 1000, MemoryMB: n.MemoryMB, DiskMB: n.DiskMB, MaxSandboxes: n.MaxSandboxes,
		PlacedCPU: float64(u.CPUMilli) / 1000, PlacedMemoryMB: u.MemoryMB, PlacedDiskMB: u.DiskMB, Sandboxes: u.Sandboxes,
		Heartbeat: n.Heartbeat.UTC().Format(time.RFC3339Nano)}
	if n.LostAt != nil {
		c.LostAt = n.LostAt.UTC().Format(time.RFC3339Nano)
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with err translated once: its kind's status, and the
// body every Corral API error has.
// An internal error's message (the database's words) is not shown.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	status := errdefs.HTTPStatus(err)
	wire := errdefs.ToWire(err)
	if status == http.StatusInternalServerError {
		s.log.Warn("control plane request failed", "op", "cluster", "err", err, "request_id", reqid.FromResponse(w))
		wire.Error.Message = "internal error"
	}
	writeJSON(w, status, wire)
}
