package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"corral/internal/e2b/envd"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// maxSignedBody bounds a signed request's lookup (a method and a query).
const maxSignedBody = 64 << 10

// signedFiles names this node's running sandbox whose envd access token
// signed a /files request that names no sandbox (apiv1.NodeSignedFiles),
// so a control plane, which holds no access tokens, can route it: 404
// when none did.
func (n *Node) signedFiles(w http.ResponseWriter, r *http.Request) {
	var req apiv1.SignedFilesRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxSignedBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, errdefs.Invalid("body", "%v", err))
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodPost {
		writeError(w, errdefs.Invalid("method", "want GET or POST, got %q", req.Method))
		return
	}
	q, err := url.ParseQuery(req.Query)
	if err != nil || !q.Has("signature") {
		writeError(w, errdefs.Invalid("query", "want a signed /files query"))
		return
	}
	id, err := envd.SignedBy(r.Context(), n.m, req.Method, q)
	if err != nil {
		writeError(w, err)
		return
	}
	if id == "" {
		writeError(w, fmt.Errorf("%w: no sandbox on this node signed it", errdefs.ErrNotFound))
		return
	}
	writeJSON(w, http.StatusOK, apiv1.SignedFilesMatch{SandboxID: id})
}
