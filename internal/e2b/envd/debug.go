package envd

import (
	"net"
	"net/http"

	"corral/internal/manager"
	"corral/internal/sandbox"
)

// DebugSandboxID is the sandbox id the e2b SDK uses in its debug mode
// (E2B_DEBUG=true): it calls no control plane and talks to envd at
// localhost:49983 (or E2B_SANDBOX_URL) as this id, with no access token.
const DebugSandboxID = "debug_sandbox_id"

// Debug wraps the envd face h so the SDK's debug mode reaches one sandbox:
// requests for DebugSandboxID go to the live sandbox ref names (an id or a
// name, resolved at each request, so it may be created after the daemon
// starts), authorized with that sandbox's own access token. Anyone who
// reaches the envd listener drives that sandbox without a token, so the
// daemon allows this only on a loopback listener (DebugListenOK).
func Debug(h http.Handler, m *manager.Manager, ref string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(sandboxIDHeader) != DebugSandboxID {
			h.ServeHTTP(w, r)
			return
		}
		id, err := m.Resolve(r.Context(), ref)
		if err != nil {
			writeError(w, errBadGateway)
			return
		}
		sb, err := m.Get(r.Context(), id)
		if err != nil || sb.State != sandbox.Running {
			writeError(w, errBadGateway)
			return
		}
		r.Header.Set(sandboxIDHeader, id)
		if r.Header.Get(accessTokenHeader) == "" {
			r.Header.Set(accessTokenHeader, m.AccessToken(sb))
		}
		h.ServeHTTP(w, r)
	})
}

// DebugListenOK reports whether addr (host:port) listens on loopback only,
// where Debug may serve.
func DebugListenOK(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
