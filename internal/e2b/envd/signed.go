package envd

import (
	"context"
	"crypto/subtle"
	"net/http"
	"net/url"

	"corral/internal/manager"
	"corral/internal/sandbox"
)

// Signed wraps the envd face h so a signed /files URL needs no routing:
// the SDK builds it on E2B_SANDBOX_URL, which names no sandbox, and
// whoever is handed the URL sends no E2b-Sandbox-Id header. A /files
// request with a signature and no sandbox named (by header or by a Host
// of <port>-<id>.<domain>) goes to the running sandbox whose access token
// makes that signature; none does: 401 "invalid signature", as a forged
// one gets. The token check itself stays h's.
func Signed(h http.Handler, m *manager.Manager) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/files" || r.Header.Get(sandboxIDHeader) != "" || !q.Has(signatureQuery) {
			h.ServeHTTP(w, r)
			return
		}
		if _, _, err := target(r); err == nil {
			h.ServeHTTP(w, r)
			return
		}
		if !q.Has(expirationQuery) {
			unauthorized(w, msgNoExpiration)
			return
		}
		id, err := SignedBy(r.Context(), m, r.Method, q)
		if err != nil {
			writeError(w, err)
			return
		}
		if id == "" {
			unauthorized(w, msgInvalidSignature)
			return
		}
		r.Header.Set(sandboxIDHeader, id)
		h.ServeHTTP(w, r)
	})
}

// SignedBy is the running sandbox of m whose access token makes the
// signature of a signed /files request (its method and query), "" when
// none does. The expiration is not checked here: the face checks it once
// the sandbox is known, and says so.
func SignedBy(ctx context.Context, m *manager.Manager, method string, q url.Values) (string, error) {
	op := "read"
	if method == http.MethodPost {
		op = "write"
	}
	exp := q.Get(expirationQuery)
	sbs, err := m.List(ctx)
	if err != nil {
		return "", err
	}
	sig := []byte(q.Get(signatureQuery))
	for _, sb := range sbs {
		if sb.State != sandbox.Running {
			continue
		}
		raw, ok := signedString(q.Get("path"), op, q.Get("username"), m.AccessToken(sb), exp)
		if ok && subtle.ConstantTimeCompare([]byte(Sign(raw)), sig) == 1 {
			return sb.ID, nil
		}
	}
	return "", nil
}
