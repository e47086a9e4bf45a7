package control

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/reqid"
)

// maxNodeAnswer bounds a node's answer read whole (a record, a list).
const maxNodeAnswer = 16 << 20

// callNode sends one request to node n with its credential and reads the
// answer whole (path may end in a query); an error means the node did not answer.
func (s *Server) callNode(ctx context.Context, n store.Node, method, path string, body io.Reader, contentType string) (nodeAnswer, error) {
	target, cred, err := s.nodeTarget(n)
	if err != nil {
		return nodeAnswer{}, err
	}
	path, query, _ := strings.Cut(path, "?")
	u := target.JoinPath(path)
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nodeAnswer{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set(nodeauth.Header, cred)
	if id := reqid.FromContext(ctx); id != "" {
		req.Header.Set(reqid.Header, id)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nodeAnswer{}, fmt.Errorf("%w: node %s does not answer: %v", errdefs.ErrUnavailable, n.ID, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxNodeAnswer))
	if err != nil {
		return nodeAnswer{}, fmt.Errorf("%w: reading node %s's answer: %v", errdefs.ErrUnavailable, n.ID, err)
	}
	return nodeAnswer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}, nil
}

// err is the node's error answer as an error of its kind (nil for a 2xx).
func (a nodeAnswer) err() error {
	if a.status >= 200 && a.status < 300 {
		return nil
	}
	var w errdefs.Wire
	if json.Unmarshal(a.body, &w) == nil && w.Error.Code != "" {
		return errdefs.FromCode(w.Error.Code, w.Error.Message)
	}
	return fmt.Errorf("%w: a node answered %d", errdefs.ErrUnavailable, a.status)
}

// decode reads a 2xx answer's JSON into v.
func (a nodeAnswer) decode(v any) error {
	if err := a.err(); err != nil {
		return err
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		return fmt.Errorf("%w: a node's answer: %v", errdefs.ErrUnavailable, err)
	}
	return nil
}
