// Package api serves Corral's HTTP API under /v1 (described by
// docs/openapi.yaml): JSON requests and responses, NDJSON streams for
// process output, raw bodies for file contents, bearer-token auth, and
// errors as {"error": {"code", "message"}} translated once, here, from
// errdefs kinds.
//
// It imports the manager and the wire types (pkg/apiv1); nothing imports it
// but cmd/corral.
package api

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"corral/internal/audit"
	"corral/internal/build"
	"corral/internal/errdefs"
	"corral/internal/hostpath"
	"corral/internal/manager"
	"corral/internal/reqid"
	"corral/internal/websession"
	"corral/pkg/apiv1"
)

// Server is the HTTP API.
type Server struct {
	m        *manager.Manager
	builder  *build.Builder
	token    string
	red      *hostpath.Redactor // host paths out of what callers see
	log      *slog.Logger
	version  string
	mux      *http.ServeMux
	trail    *audit.Trail   // nil: the audit trail is off (audit.go)
	recorder audit.Recorder // where changing calls are recorded (nil: off)
	// sessions, when set, signs browsers in: a console session cookie
	// authorises like the token (with CSRF checks: internal/websession).
	sessions *websession.Store
	// ports, when set, is the ports origin (origin.go): browsers are sent
	// there, and each exposed port is given its URL on it.
	ports *PortsOrigin
}

// AcceptSessions makes the API accept the console's session cookies from
// st besides the bearer token.
func (s *Server) AcceptSessions(st *websession.Store) { s.sessions = st }

// New returns the API handler for m (and b, which builds images; nil: this
// daemon does not), requiring token on every call but /v1/health.
func New(m *manager.Manager, b *build.Builder, token, version string, log *slog.Logger) *Server {
	s := &Server{m: m, builder: b, token: token, log: log, version: version, mux: http.NewServeMux(),
		red: hostpath.NewRedactor(m.HostPaths()...)}
	s.routes()
	return s
}

// route is one endpoint; the table is also checked against
// docs/openapi.yaml by a test.
type route struct {
	pattern string
	public  bool
	handler func(*Server) http.HandlerFunc
}

var routes = []route{
	{"GET /v1/health", true, func(s *Server) http.HandlerFunc { return s.health }},
	{"GET /v1/version", false, func(s *Server) http.HandlerFunc { return s.getVersion }},
	{"GET /v1/debug/runtime", false, func(s *Server) http.HandlerFunc { return s.debugRuntime }},
	{"POST /v1/sandboxes", false, func(s *Server) http.HandlerFunc { return s.createSandbox }},
	{"GET /v1/sandboxes", false, func(s *Server) http.HandlerFunc { return s.listSandboxes }},
	{"GET /v1/sandboxes/{id}", false, func(s *Server) http.HandlerFunc { return s.getSandbox }},
	{"DELETE /v1/sandboxes/{id}", false, func(s *Server) http.HandlerFunc { return s.deleteSandbox }},
	{"PATCH /v1/sandboxes/{id}", false, func(s *Server) http.HandlerFunc { return s.updateSandbox }},
	{"POST /v1/sandboxes/{id}/pause", false, func(s *Server) http.HandlerFunc { return s.pauseSandbox }},
	{"POST /v1/sandboxes/{id}/resume", false, func(s *Server) http.HandlerFunc { return s.resumeSandbox }},
	{"PUT /v1/sandboxes/{id}/network", false, func(s *Server) http.HandlerFunc { return s.setNetwork }},
	{"POST /v1/sandboxes/{id}/wait", false, func(s *Server) http.HandlerFunc { return s.waitSandbox }},
	{"GET /v1/sandboxes/{id}/logs", false, func(s *Server) http.HandlerFunc { return s.sandboxLogs }},
	{"GET /v1/sandboxes/{id}/events", false, func(s *Server) http.HandlerFunc { return s.sandboxEvents }},
	{"GET /v1/sandboxes/{id}/metrics", false, func(s *Server) http.HandlerFunc { return s.sandboxMetrics }},
	{"GET /v1/sandboxes/{id}/usage", false, func(s *Server) http.HandlerFunc { return s.sandboxUsage }},
	{"GET /v1/usage", false, func(s *Server) http.HandlerFunc { return s.usageReport }},
	{"POST /v1/sandboxes/{id}/processes", false, func(s *Server) http.HandlerFunc { return s.execProcess }},
	{"GET /v1/sandboxes/{id}/pty", false, func(s *Server) http.HandlerFunc { return s.openPTY }},
	{"GET /v1/sandboxes/{id}/processes", false, func(s *Server) http.HandlerFunc { return s.listProcesses }},
	{"GET /v1/sandboxes/{id}/processes/{pid}/events", false, func(s *Server) http.HandlerFunc { return s.attachProcess }},
	{"POST /v1/sandboxes/{id}/processes/{pid}/stdin", false, func(s *Server) http.HandlerFunc { return s.processStdin }},
	{"POST /v1/sandboxes/{id}/processes/{pid}/signal", false, func(s *Server) http.HandlerFunc { return s.signalProcess }},
	{"POST /v1/sandboxes/{id}/processes/{pid}/resize", false, func(s *Server) http.HandlerFunc { return s.resizeProcess }},
	{"GET /v1/sandboxes/{id}/files", false, func(s *Server) http.HandlerFunc { return s.readFile }},
	{"PUT /v1/sandboxes/{id}/files", false, func(s *Server) http.HandlerFunc { return s.writeFile }},
	{"GET /v1/sandboxes/{id}/files/watch", false, func(s *Server) http.HandlerFunc { return s.watchFiles }},
	{"GET /v1/sandboxes/{id}/fs/stat", false, func(s *Server) http.HandlerFunc { return s.statFile }},
	{"GET /v1/sandboxes/{id}/fs/list", false, func(s *Server) http.HandlerFunc { return s.listDir }},
	{"POST /v1/sandboxes/{id}/fs/mkdir", false, func(s *Server) http.HandlerFunc { return s.makeDir }},
	{"POST /v1/sandboxes/{id}/fs/remove", false, func(s *Server) http.HandlerFunc { return s.removePath }},
	{"POST /v1/sandboxes/{id}/fs/rename", false, func(s *Server) http.HandlerFunc { return s.renamePath }},
	{"POST /v1/sandboxes/{id}/fs/chmod", false, func(s *Server) http.HandlerFunc { return s.chmodPath }},
	{"POST /v1/sandboxes/{id}/snapshots/fs", false, func(s *Server) http.HandlerFunc { return s.snapshotFS }},
	{"POST /v1/sandboxes/{id}/snapshots/memory", false, func(s *Server) http.HandlerFunc { return s.snapshotMemory }},
	{"POST /v1/sandboxes/{id}/fork", false, func(s *Server) http.HandlerFunc { return s.forkSandbox }},
	{"GET /v1/snapshots", false, func(s *Server) http.HandlerFunc { return s.listSnapshots }},
	{"GET /v1/snapshots/{ref}", false, func(s *Server) http.HandlerFunc { return s.getSnapshot }},
	{"DELETE /v1/snapshots/{ref}", false, func(s *Server) http.HandlerFunc { return s.deleteSnapshot }},
	{"GET /v1/audit", false, func(s *Server) http.HandlerFunc { return s.getAudit }},
	{"GET /v1/audit/export", false, func(s *Server) http.HandlerFunc { return s.exportAudit }},
	{"GET /v1/audit/verify", false, func(s *Server) http.HandlerFunc { return s.verifyAudit }},
	{"GET /v1/images", false, func(s *Server) http.HandlerFunc { return s.listImages }},
	{"POST /v1/images/prune", false, func(s *Server) http.HandlerFunc { return s.pruneImages }},
	{"POST /v1/images/import", false, func(s *Server) http.HandlerFunc { return s.importImage }},
	{"POST /v1/images/pull", false, func(s *Server) http.HandlerFunc { return s.pullImage }},
	{"POST /v1/images/build", false, func(s *Server) http.HandlerFunc { return s.buildImage }},
	{"POST /v1/images/layers", false, func(s *Server) http.HandlerFunc { return s.uploadLayer }},
	{"GET /v1/images/layers/{digest}", false, func(s *Server) http.HandlerFunc { return s.getLayer }},
	{"GET /v1/images/{ref...}", false, func(s *Server) http.HandlerFunc { return s.getImage }},
	{"DELETE /v1/images/{ref...}", false, func(s *Server) http.HandlerFunc { return s.deleteImage }},
	{"POST /v1/volumes", false, func(s *Server) http.HandlerFunc { return s.createVolume }},
	{"GET /v1/volumes", false, func(s *Server) http.HandlerFunc { return s.listVolumes }},
	{"GET /v1/volumes/{name}", false, func(s *Server) http.HandlerFunc { return s.getVolume }},
	{"DELETE /v1/volumes/{name}", false, func(s *Server) http.HandlerFunc { return s.deleteVolume }},
	{"GET /v1/volumes/{name}/files", false, func(s *Server) http.HandlerFunc { return s.readVolumeFile }},
	{"PUT /v1/volumes/{name}/files", false, func(s *Server) http.HandlerFunc { return s.writeVolumeFile }},
	{"GET /v1/volumes/{name}/list", false, func(s *Server) http.HandlerFunc { return s.listVolumeDir }},
	{"POST /v1/secrets", false, func(s *Server) http.HandlerFunc { return s.createSecret }},
	{"GET /v1/secrets", false, func(s *Server) http.HandlerFunc { return s.listSecrets }},
	{"GET /v1/secrets/{name}", false, func(s *Server) http.HandlerFunc { return s.getSecret }},
	{"PUT /v1/secrets/{name}", false, func(s *Server) http.HandlerFunc { return s.rotateSecret }},
	{"DELETE /v1/secrets/{name}", false, func(s *Server) http.HandlerFunc { return s.deleteSecret }},
	// Exposed ports authorise with the sandbox's port token themselves.
	{"/v1/sandboxes/{id}/ports/{port}/{path...}", true, func(s *Server) http.HandlerFunc { return s.proxyPort }},
	{"GET /v1/sandboxes/{id}/tunnel/{port}", true, func(s *Server) http.HandlerFunc { return s.tunnelPort }},
}

func (s *Server) routes() {
	for _, r := range routes {
		h := r.handler(s)
		if !r.public {
			// A name works wherever an id does, for callers with the
			// token (a port's public URL takes the id only: it does not
			// tell strangers which names exist).
			if strings.Contains(r.pattern, "{id}") {
				h = s.byName(h)
			}
			h = s.audited(s.auth(h))
		}
		s.mux.HandleFunc(r.pattern, h)
	}
	s.mux.HandleFunc("/", s.auth(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, fmt.Errorf("%w: no route for %s %s", errdefs.ErrNotFound, r.Method, r.URL.Path))
	}))
}

// ServeHTTP implements http.Handler, recovering from panics so one bad
// request never takes the daemon down.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
			s.writeError(w, fmt.Errorf("internal error"))
		}
	}()
	body, tr := trackBody(r)
	s.mux.ServeHTTP(w, tr)
	body.drain(w, r)
}

// Protect guards h with the API token, as every non-public route is
// (the daemon's /metrics when it shares the API listener).
func (s *Server) Protect(h http.Handler) http.Handler { return s.auth(h.ServeHTTP) }

func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.Header.Get("Authorization") == "" && s.sessions != nil && websession.HasCookie(r) {
			if err := s.sessions.Check(r); err != nil {
				s.writeError(w, err)
				return
			}
			next(w, r)
			return
		}
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

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	u := s.m.Usage()
	v := apiv1.Version{Version: s.version, Runtimes: s.m.Runtimes(), Capacity: apiv1.Capacity{
		MemoryMB: u.MemoryMB, CPU: float64(u.CPUMilli) / 1000, MemoryOvercommit: u.MemoryOvercommit, CPUOvercommit: u.CPUOvercommit,
		AdmittableMemoryMB: u.AdmittableMemoryMB, AdmittableCPU: float64(u.AdmittableCPUMilli) / 1000,
		ReservedMemoryMB: u.ReservedMemoryMB, ReservedCPU: float64(u.ReservedCPUMilli) / 1000,
		Sandboxes: u.Sandboxes, MaxSandboxes: u.MaxSandboxes,
	}}
	for _, p := range s.m.WarmPools() {
		if v.WarmPool == nil {
			v.WarmPool = &apiv1.WarmPool{}
		}
		v.WarmPool.Size += p.Size
		v.WarmPool.Ready += p.Ready
		v.WarmPool.Hits += p.Hits
		v.WarmPool.Misses += p.Misses
		v.WarmPools = append(v.WarmPools, apiv1.WarmPool{Size: p.Size, Ready: p.Ready, Hits: p.Hits, Misses: p.Misses, Runtime: p.Spec.Runtime,
			Image: p.Spec.Image, CPU: p.Spec.CPU, MemoryMB: p.Spec.MemoryMB, DiskMB: p.Spec.DiskMB})
	}
	writeJSON(w, http.StatusOK, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with err translated: its kind's status and code, and
// its message without host paths, and the request's id when the daemon
// gave it one (reqid.Middleware). An internal error (500) is logged with
// its full message, which the caller does not see.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	status := errdefs.HTTPStatus(err)
	id := reqid.FromResponse(w)
	if status == http.StatusInternalServerError {
		s.log.Warn("request failed", "op", "api", "code", errdefs.Code(err), "err", err, reqid.Key, id)
	}
	writeJSON(w, status, apiv1.Error{Error: apiv1.ErrorDetail{Code: errdefs.Code(err), Message: s.red.String(err.Error()), RequestID: id}})
}
