package node

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"corral/internal/cluster/nodeauth"
)

// The credential lets a control plane in as the API token would, without
// the token crossing the wire; a wrong one is refused before the API; a
// request without one reaches the API as it came.
func TestHandlerCredential(t *testing.T) {
	n := &Node{cred: nodeauth.Credential("join-token-0123456789", "n1", "nonce"), token: "api-token"}
	var seen *http.Request
	h := n.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r }))
	for _, c := range []struct {
		name, cred, auth string
		status           int
		wantAuth         string
	}{
		{"right credential", n.cred, "", 200, "Bearer api-token"},
		{"right credential and a caller's token", n.cred, "Bearer other", 200, "Bearer api-token"},
		{"wrong credential", nodeauth.Credential("join-token-0123456789", "n2", "nonce"), "", 401, ""},
		{"none", "", "Bearer x", 200, "Bearer x"},
	} {
		seen = nil
		r := httptest.NewRequest(http.MethodGet, "/v1/sandboxes", nil)
		if c.cred != "" {
			r.Header.Set(nodeauth.Header, c.cred)
		}
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status {
			t.Errorf("%s: status %d, want %d", c.name, w.Code, c.status)
			continue
		}
		if c.status != 200 {
			if seen != nil {
				t.Errorf("%s: reached the API", c.name)
			}
			continue
		}
		if got := seen.Header.Get("Authorization"); got != c.wantAuth {
			t.Errorf("%s: the API saw Authorization %q, want %q", c.name, got, c.wantAuth)
		}
		if seen.Header.Get(nodeauth.Header) != "" {
			t.Errorf("%s: the credential reached the API", c.name)
		}
	}
}
