package node

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"corral/internal/cluster/nodeauth"
	"corral/pkg/apiv1"
)

// A signer lookup is opened by the node credential only, and a body that
// is not a signed /files request is a 400 naming what is wrong (before any
// sandbox is looked at: this node has no manager).
func TestSignedFilesInput(t *testing.T) {
	n := &Node{cred: nodeauth.Credential("join-token-0123456789", "n1", "nonce"), token: "api-token"}
	h := n.Handler(http.NotFoundHandler())
	for _, c := range []struct {
		name, cred, body string
		status           int
		field            string
	}{
		{"no credential", "", `{"method":"GET","query":"signature=v1_x"}`, 401, ""},
		{"not JSON", n.cred, `nope`, 400, "body"},
		{"an unknown field", n.cred, `{"method":"GET","query":"signature=v1_x","id":"sb-1"}`, 400, "body"},
		{"another method", n.cred, `{"method":"DELETE","query":"signature=v1_x"}`, 400, "method"},
		{"no signature", n.cred, `{"method":"GET","query":"path=/x"}`, 400, "query"},
		{"a bad query", n.cred, `{"method":"GET","query":"%zz"}`, 400, "query"},
	} {
		r := httptest.NewRequest(http.MethodPost, apiv1.NodeSignedFiles, strings.NewReader(c.body))
		if c.cred != "" {
			r.Header.Set(nodeauth.Header, c.cred)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.field) {
			t.Errorf("%s: %d %s, want %d naming %q", c.name, w.Code, w.Body.String(), c.status, c.field)
		}
	}
}
