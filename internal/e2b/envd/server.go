package envd

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"corral/internal/e2b/envd/gen/filesystem/filesystemconnect"
	"corral/internal/e2b/envd/gen/process/processconnect"
	"corral/internal/errdefs"
	"corral/internal/hostpath"
	"corral/internal/manager"
	"corral/internal/sandbox"
)

// Port is the port E2B clients address envd on; requests for any other
// port go to that port inside the sandbox.
const Port = 49983

// Version is the envd version this face implements as far as the e2b SDK's
// version gates go (see README): the process and filesystem API with
// stdin:false (0.3.0), no forced default user (0.4.0), CloseStdin (0.5.2)
// octet-stream uploads (0.5.7), file metadata (0.6.2: X-Metadata-* kept as
// user.e2b.* attributes, reported by Stat and ListDir), watch events
// carrying entries (0.6.3: includeEntry) and watchDir's allowNetworkMounts
// (0.6.4: accepted; Corral never refuses a watch on a network mount, so
// the flag changes nothing here, see docs/E2B.md).
const Version = "0.6.4"

// maxMessage bounds one Connect request message.
const maxMessage = 8 << 20

// Headers the e2b SDK sends with every envd request, and the one carrying
// the sandbox's envd access token.
const (
	sandboxIDHeader   = "E2b-Sandbox-Id"
	sandboxPortHeader = "E2b-Sandbox-Port"
	accessTokenHeader = "X-Access-Token"
)

// Server serves the envd face of every sandbox of one manager.
type Server struct {
	m        *manager.Manager
	log      *slog.Logger
	red      *hostpath.Redactor
	rpc      *http.ServeMux
	watchers *watchers
}

// New returns the envd face over m.
func New(m *manager.Manager, log *slog.Logger) *Server {
	s := &Server{m: m, log: log, red: hostpath.NewRedactor(m.HostPaths()...), rpc: http.NewServeMux(), watchers: newWatchers()}
	// A request message (SendInput's data the largest) is bounded.
	limit := connect.WithReadMaxBytes(maxMessage)
	path, h := processconnect.NewProcessHandler(&processService{s: s}, limit)
	s.rpc.Handle(path, h)
	path, h = filesystemconnect.NewFilesystemHandler(&filesystemService{s: s}, limit)
	s.rpc.Handle(path, h)
	s.rpc.HandleFunc("GET /health", s.health)
	s.rpc.HandleFunc("GET /files", s.downloadFile)
	s.rpc.HandleFunc("POST /files", s.uploadFile)
	s.rpc.HandleFunc("GET /envs", s.envs)
	s.rpc.HandleFunc("GET /metrics", s.metrics)
	return s
}

// ServeHTTP routes a request to its sandbox: port Port to the envd face
// (after the access token check), any other port to the sandbox's port.
// The routing headers are set on the request from the Host form, so the
// handlers read the sandbox id from one place.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, port, err := target(r)
	if err != nil {
		writeError(w, err)
		return
	}
	r.Header.Set(sandboxIDHeader, id)
	r.Header.Set(sandboxPortHeader, strconv.Itoa(port))
	if port != Port {
		s.proxyPort(w, r, id, port)
		return
	}
	if r.URL.Path != "/health" && !s.authorized(w, r, id) {
		return
	}
	s.rpc.ServeHTTP(w, r)
}

// target is the sandbox id and port a request is for: the headers, or a
// Host of the form <port>-<id>.<anything>.
func target(r *http.Request) (string, int, error) {
	id, portStr := r.Header.Get(sandboxIDHeader), r.Header.Get(sandboxPortHeader)
	if id == "" {
		host := r.Host
		if i := strings.IndexByte(host, '.'); i > 0 {
			host = host[:i]
		}
		p, rest, ok := strings.Cut(host, "-")
		if !ok || rest == "" {
			return "", 0, errdefs.Invalid(sandboxIDHeader, "no sandbox named: send the E2b-Sandbox-Id and E2b-Sandbox-Port headers or a Host of <port>-<sandbox id>.<domain>")
		}
		id, portStr = rest, p
	}
	if portStr == "" {
		portStr = strconv.Itoa(Port)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, errdefs.Invalid(sandboxPortHeader, "%q is not a TCP port", portStr)
	}
	if len(id) > 128 {
		return "", 0, errdefs.Invalid(sandboxIDHeader, "longer than 128 bytes")
	}
	return id, port, nil
}

// sandboxID is the sandbox a routed request is for (ServeHTTP set it).
func sandboxID(h http.Header) string { return h.Get(sandboxIDHeader) }

// health is GET /health: 204 while the sandbox runs, 502 once it does not
// (the e2b SDK reads 502 as "the sandbox is gone").
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	sb, err := s.m.Get(r.Context(), sandboxID(r.Header))
	if err != nil || sb.State != sandbox.Running {
		writeError(w, errBadGateway)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// record is the live sandbox id, or NotFound.
func (s *Server) record(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	return s.m.Get(ctx, id)
}

// files is the manager's file service with envd's path rule: a relative
// path resolves against the requesting user's home (root's is /root), not
// the sandbox's workdir.
func (s *Server) files() manager.Files { return s.m.Files().FromHome() }
