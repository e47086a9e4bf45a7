package e2b

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"corral/internal/build"
	"corral/internal/errdefs"
	"corral/internal/hostpath"
	"corral/internal/manager"
)

// KeyPrefix begins every E2B API key: a key is KeyPrefix followed by the
// daemon's API token (the SDKs expect e2b_ and hex; a daemon makes its
// token hex).
const KeyPrefix = "e2b_"

// Config is what a Server needs.
type Config struct {
	Manager *manager.Manager
	// Builder builds the "base" template's image; nil: "base" is Corral's
	// own base image (a daemon always has a builder; tests may not).
	Builder *build.Builder
	// Token is the daemon's API token; the key is KeyPrefix + Token.
	Token string
	// Domain is what responses give as the sandboxes' domain ("": none,
	// the SDK keeps its own, E2B_DOMAIN).
	Domain string
	// Runtime is the runtime of the sandboxes E2B clients create from an
	// image ("": the daemon's default, gvisor); a memory snapshot's copy
	// keeps the snapshot's. E2B's API has no field for it, so it is the
	// operator's choice (corral serve --e2b-runtime).
	Runtime string
	Log     *slog.Logger
}

// Server is the E2B control API, to be mounted with the prefix /e2b
// stripped.
type Server struct {
	cfg  Config
	m    *manager.Manager
	red  *hostpath.Redactor
	log  *slog.Logger
	mux  *http.ServeMux
	tmpl *templates
}

// New returns the E2B control API over cfg.Manager.
func New(cfg Config) *Server {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, m: cfg.Manager, log: log, mux: http.NewServeMux(),
		red: hostpath.NewRedactor(cfg.Manager.HostPaths()...), tmpl: newTemplates(cfg.Manager, cfg.Builder, log)}
	if !isHex(cfg.Token) {
		log.Warn("the API token is not hex: E2B SDKs that check keys want e2b_ and hex", "op", "e2b")
	}
	s.routes()
	return s
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// routes is every endpoint, as E2B's spec names them.
func (s *Server) routes() {
	for pattern, h := range map[string]http.HandlerFunc{
		"POST /sandboxes":                 s.createV1,
		"POST /v2/sandboxes":              s.createV2,
		"GET /sandboxes":                  s.listV1,
		"GET /v2/sandboxes":               s.listV2,
		"GET /sandboxes/{id}":             s.info,
		"DELETE /sandboxes/{id}":          s.kill,
		"POST /sandboxes/{id}/timeout":    s.setTimeout,
		"POST /sandboxes/{id}/connect":    s.connectV1,
		"POST /v2/sandboxes/{id}/connect": s.connectV2,
		"POST /sandboxes/{id}/pause":      s.pause,
		"POST /sandboxes/{id}/resume":     s.resume,
		"GET /sandboxes/{id}/metrics":     s.metrics,
		"GET /sandboxes/metrics":          s.metricsMany,
		"PUT /sandboxes/{id}/network":     s.updateNetwork,
		"POST /sandboxes/{id}/snapshots":  s.createSnapshot,
		"GET /snapshots":                  s.listSnapshots,
		"DELETE /templates/{templateID}":  s.deleteTemplate,
		"POST /sandboxes/{id}/fork":       s.fork,
	} {
		s.mux.HandleFunc(pattern, s.auth(h))
	}
	s.mux.HandleFunc("/", s.auth(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, fmt.Errorf("%w: no route for %s %s in Corral's E2B API", errdefs.ErrNotFound, r.Method, r.URL.Path))
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
			s.log.Error("panic serving an e2b request", "method", r.Method, "path", r.URL.Path, "panic", v)
			s.writeError(w, errors.New("internal error"))
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// auth requires X-API-KEY: e2b_<daemon token>.
func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-KEY")
		if key == "" {
			s.writeError(w, fmt.Errorf("%w: missing X-API-KEY header (%s followed by the daemon's token)", errdefs.ErrUnauthenticated, KeyPrefix))
			return
		}
		tok, ok := strings.CutPrefix(key, KeyPrefix)
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) != 1 {
			s.writeError(w, fmt.Errorf("%w: invalid API key (want %s followed by the daemon's token)", errdefs.ErrUnauthenticated, KeyPrefix))
			return
		}
		next(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with err in E2B's shape: its kind's status as code,
// its message without host paths. An internal error is logged in full.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	status := errdefs.HTTPStatus(err)
	if status == http.StatusInternalServerError {
		s.log.Warn("e2b request failed", "op", "e2b", "err", err)
	}
	writeJSON(w, status, apiError{Code: status, Message: s.red.String(err.Error())})
}

// maxBody bounds every JSON request body.
const maxBody = 1 << 20

// decode reads a bounded, strictly typed JSON body into v. An empty body
// is an empty object when optional, else a 400.
func decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF) && optional:
		return nil
	case errors.Is(err, io.EOF):
		return errdefs.Invalid("body", "a JSON object is required")
	default:
		return bodyError(err)
	}
	if dec.More() {
		return errdefs.Invalid("body", "trailing data after the JSON object")
	}
	return nil
}

// bodyError names what is wrong with a body that did not decode.
func bodyError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &typeErr):
		return errdefs.Invalid(typeErr.Field, "must be a JSON %s, got %s", typeErr.Type, typeErr.Value)
	case errors.As(err, &maxErr):
		return errdefs.Invalid("body", "larger than %d bytes", maxBody)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return errdefs.Invalid(strings.Trim(f, `"`), "is not a field Corral's E2B API knows")
	default:
		return errdefs.Invalid("body", "not valid JSON: %v", err)
	}
}
