// Package reqid gives every HTTP request to the daemon an id: taken from a
// sane incoming X-Request-Id or made here, returned in the X-Request-Id
// response header, carried in the request's context, and added to every
// log line logged with that context (Handler). With it an error a caller
// saw can be found in the daemon's log.
//
// It imports nothing from Corral and no third-party module.
package reqid

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Header is the request and response header that carries the id.
const Header = "X-Request-Id"

// maxLen bounds an incoming id: longer ones are replaced, not cut.
const maxLen = 128

type ctxKey struct{}

// FromContext returns the request id ctx carries ("" when none).
func FromContext(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// WithID returns ctx carrying id.
func WithID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// New makes a fresh id: 16 random bytes in hex.
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Sane reports whether an incoming id may be kept: 1 to 128 characters of
// letters, digits and - _ . : (what tracing systems and load balancers
// send), so it can go into a header and a log line unchanged and cannot
// forge another line or field.
func Sane(id string) bool {
	if id == "" || len(id) > maxLen {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// Middleware gives each request its id (the caller's, when Sane, else a
// new one), sets the response header before next runs (so an error body
// can repeat it: FromResponse), and logs one line per request when it
// ends: at info for an answer of 400 or more, at debug otherwise.
func Middleware(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(Header)
		if !Sane(id) {
			id = New()
		}
		w.Header().Set(Header, id)
		ctx := WithID(r.Context(), id)
		sw := &StatusWriter{ResponseWriter: w}
		t0 := time.Now()
		next.ServeHTTP(sw, r.WithContext(ctx))
		status := sw.Status()
		level := slog.LevelDebug
		if status >= 400 {
			level = slog.LevelInfo
		}
		log.Log(ctx, level, "request", "op", "http", "method", r.Method, "path", r.URL.Path, "status", status,
			"duration_ms", float64(time.Since(t0).Microseconds())/1000)
	})
}

// FromResponse returns the request id Middleware set on w ("" when it
// did not run, as for a handler called in process).
func FromResponse(w http.ResponseWriter) string {
	return w.Header().Get(Header)
}

// StatusWriter remembers the status written, and passes on what streams
// and tunnels need (Flush, Hijack, and Unwrap for http.ResponseController).
// The audit trail's middleware uses it too.
type StatusWriter struct {
	http.ResponseWriter
	status int
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *StatusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes the connection on (a tunnel or an upgraded proxied
// connection); the status is then 101, whatever the hijacker writes.
func (w *StatusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be hijacked")
	}
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return hj.Hijack()
}

func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Status is the status the handler answered with (200 if it wrote
// nothing, as net/http then answers).
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
