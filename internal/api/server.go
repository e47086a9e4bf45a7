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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/pkg/apiv1"
)

// maxJSONBody bounds every JSON request body.
const maxJSONBody = 1 << 20

// Server is the HTTP API.
type Server struct {
	m       *manager.Manager
	token   string
	log     *slog.Logger
	version string
	mux     *http.ServeMux
}

// New returns the API handler for m, requiring token on every call but
// /v1/health.
func New(m *manager.Manager, token, version string, log *slog.Logger) *Server {
	s := &Server{m: m, token: token, log: log, version: version, mux: http.NewServeMux()}
	s.routes()
	return s
}

func (s *Server) routes() {
	h := s.mux.HandleFunc
	h("GET /v1/health", s.health)
	h("GET /v1/version", s.auth(s.getVersion))
	h("POST /v1/sandboxes", s.auth(s.createSandbox))
	h("GET /v1/sandboxes", s.auth(s.listSandboxes))
	h("GET /v1/sandboxes/{id}", s.auth(s.getSandbox))
	h("DELETE /v1/sandboxes/{id}", s.auth(s.deleteSandbox))
	h("POST /v1/sandboxes/{id}/wait", s.auth(s.waitSandbox))
	h("GET /v1/sandboxes/{id}/logs", s.auth(s.sandboxLogs))
	h("GET /v1/sandboxes/{id}/events", s.auth(s.sandboxEvents))
	h("POST /v1/sandboxes/{id}/processes", s.auth(s.execProcess))
	h("GET /v1/sandboxes/{id}/processes", s.auth(s.listProcesses))
	h("GET /v1/sandboxes/{id}/processes/{pid}/events", s.auth(s.attachProcess))
	h("POST /v1/sandboxes/{id}/processes/{pid}/stdin", s.auth(s.processStdin))
	h("POST /v1/sandboxes/{id}/processes/{pid}/signal", s.auth(s.signalProcess))
	h("POST /v1/sandboxes/{id}/processes/{pid}/resize", s.auth(s.resizeProcess))
	h("GET /v1/sandboxes/{id}/files", s.auth(s.readFile))
	h("PUT /v1/sandboxes/{id}/files", s.auth(s.writeFile))
	h("GET /v1/sandboxes/{id}/fs/stat", s.auth(s.statFile))
	h("GET /v1/sandboxes/{id}/fs/list", s.auth(s.listDir))
	h("POST /v1/sandboxes/{id}/fs/mkdir", s.auth(s.makeDir))
	h("POST /v1/sandboxes/{id}/fs/remove", s.auth(s.removePath))
	h("POST /v1/sandboxes/{id}/fs/rename", s.auth(s.renamePath))
	h("POST /v1/sandboxes/{id}/fs/chmod", s.auth(s.chmodPath))
	h("/", s.auth(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: no route for %s %s", errdefs.ErrNotFound, r.Method, r.URL.Path))
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
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
			writeError(w, fmt.Errorf("internal error"))
		}
	}()
	s.mux.ServeHTTP(w, r)
}

func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || got == "" {
			writeError(w, fmt.Errorf("%w: missing bearer token (Authorization: Bearer <token>)", errdefs.ErrUnauthenticated))
			return
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
			writeError(w, fmt.Errorf("%w: wrong token", errdefs.ErrUnauthenticated))
			return
		}
		next(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, apiv1.Version{Version: s.version, Runtimes: s.m.Runtimes()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, errdefs.HTTPStatus(err), apiv1.Error{Error: apiv1.ErrorDetail{Code: errdefs.Code(err), Message: err.Error()}})
}

// decodeJSON reads a bounded, strictly typed JSON body into v; its errors
// name the offending field.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errdefs.Invalid("body", "trailing data after the JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		tooBig *http.MaxBytesError
	)
	switch {
	case errors.As(err, &syntax):
		return errdefs.Invalid("body", "malformed JSON at byte %d: %v", syntax.Offset, err)
	case errors.As(err, &typ):
		return errdefs.Invalid(typ.Field, "expected %s, got JSON %s", typ.Type, typ.Value)
	case errors.As(err, &tooBig):
		return errdefs.Invalid("body", "larger than %d bytes", tooBig.Limit)
	case errors.Is(err, io.EOF):
		return errdefs.Invalid("body", "empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errdefs.Invalid("body", "truncated JSON")
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return errdefs.Invalid(strings.Trim(f, `"`), "unknown field")
	}
	return errdefs.Invalid("body", "%v", err)
}
