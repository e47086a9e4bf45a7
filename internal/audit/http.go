package audit

import (
	"net/http"
	"strconv"
	"time"

	"corral/internal/reqid"
)

// Changes reports whether a request of this method can change something
// (every method but GET, HEAD and OPTIONS).
func Changes(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// Recorder is where Calls records: the trail itself, or the writer that
// charges an entry naming a sandbox to that sandbox's budget
// (sandboxlog.Writer).
type Recorder interface {
	Record(kind, sandboxID, caller string, fields map[string]string)
}

// Calls wraps next so that a call that changes something is recorded in
// rec (kind api) once it is answered: face, method, path (never the query
// or the body), status and duration, by caller (named by callerOf from
// the request). Every request carries its caller in its context, for the
// entries the manager records on its behalf. sandboxOf, if not nil, names
// the sandbox from the request after next has run (a route's path value).
// A nil rec records nothing.
func Calls(rec Recorder, face string, next http.Handler, callerOf func(*http.Request) string, sandboxOf func(*http.Request) string) http.Handler {
	if rec == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller := callerOf(r)
		r = r.WithContext(WithCaller(r.Context(), caller))
		if !Changes(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		sw := &reqid.StatusWriter{ResponseWriter: w}
		start := time.Now()
		defer func() {
			sb := ""
			if sandboxOf != nil {
				sb = sandboxOf(r)
			}
			status := sw.Status()
			rec.Record("api", sb, caller, map[string]string{
				"face": face, "method": r.Method, "path": r.URL.Path, "status": strconv.Itoa(status),
				"duration_ms": strconv.FormatInt(time.Since(start).Milliseconds(), 10),
			})
		}()
		next.ServeHTTP(sw, r)
	})
}
