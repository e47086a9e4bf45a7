package control

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"corral/internal/cluster/nodetls"
	"corral/internal/cluster/store"
)

// pin registers the fingerprint of fake node srv's certificate as node
// id's (every httptest TLS server has the same one).
func pin(t *testing.T, st *store.Store, id, credHash string, srv *httptest.Server) {
	t.Helper()
	if err := st.SetTLSFingerprint(context.Background(), id, credHash, nodetls.Fingerprint(srv.Certificate())); err != nil {
		t.Fatal(err)
	}
}

// A node whose key is not the one it registered is not called: the
// call fails naming the node and the pin.
func TestNodeKeyMismatchRefused(t *testing.T) {
	st, _, _ := setup(t)
	status, body := call(t, controlFor(t, st, testJoin), "POST", "/v1/sandboxes", testToken, "{}")
	if status != http.StatusCreated {
		t.Fatalf("a create with the right pin: %d %s", status, body)
	}
	var sb struct{ ID string }
	if err := json.Unmarshal([]byte(body), &sb); err != nil {
		t.Fatal(err)
	}
	n, err := st.Node(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	other := "sha256:" + strings.Repeat("ab", 32)
	if err := st.SetTLSFingerprint(context.Background(), "n1", n.CredentialHash, other); err != nil {
		t.Fatal(err)
	}
	if status, body := call(t, controlFor(t, st, testJoin), "GET", "/v1/cluster/nodes", testToken, ""); status != http.StatusOK ||
		!strings.Contains(body, `"tls_fingerprint":"`+other+`"`) {
		t.Fatalf("the nodes' list does not show the registered fingerprint: %d %s", status, body)
	}
	// A new control plane: no connection open to the node yet (a key
	// changes with the node's restart, which closes them).
	status, body = call(t, controlFor(t, st, testJoin), "GET", "/v1/sandboxes/"+sb.ID, testToken, "")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "node n1") || !strings.Contains(body, "node n1 pinned to "+other) {
		t.Fatalf("a call on the node's sandbox with another pin: %d %s", status, body)
	}
}
