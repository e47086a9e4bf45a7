package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// isSignedFiles is a /files request with a URL signature (the e2b SDK's
// uploadUrl and downloadUrl, built on E2B_SANDBOX_URL).
func isSignedFiles(r *http.Request) bool {
	return r.URL.Path == "/files" && r.URL.Query().Has("signature")
}

// signedBy finds the sandbox that signed a /files request naming none:
// the control plane holds no access tokens, so every ready node with an
// envd face is asked at once (apiv1.NodeSignedFiles) which of its
// sandboxes made the signature. "" when none did; an error when none did
// and some node did not answer (the signer may be there).
func (s *Server) signedBy(r *http.Request) (string, error) {
	ns, err := s.st.Nodes(r.Context())
	if err != nil {
		return "", err
	}
	body, _ := json.Marshal(apiv1.SignedFilesRequest{Method: r.Method, Query: r.URL.RawQuery})
	var mu sync.Mutex
	var found string
	var errs []error
	var wg sync.WaitGroup
	for _, n := range ns {
		if n.State != store.NodeReady || n.EnvdAddress == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := s.signedOn(r.Context(), n, body)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case id != "":
				found = id
			}
		}()
	}
	wg.Wait()
	if found != "" || len(errs) == 0 {
		return found, nil
	}
	return "", fmt.Errorf("%w: a signed URL names no sandbox, and finding its signer failed: %v", errdefs.ErrUnavailable, errors.Join(errs...))
}

// signedOn asks node n which of its sandboxes signed a request ("" for
// none).
func (s *Server) signedOn(ctx context.Context, n store.Node, body []byte) (string, error) {
	a, err := s.callNode(ctx, n, http.MethodPost, apiv1.NodeSignedFiles, bytes.NewReader(body), "application/json")
	if err != nil {
		return "", err
	}
	var m apiv1.SignedFilesMatch
	if err := a.decode(&m); errors.Is(err, errdefs.ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("node %s: %w", n.ID, err)
	}
	return m.SandboxID, nil
}
