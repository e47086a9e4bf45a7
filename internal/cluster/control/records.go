package control

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"corral/internal/cluster/store"
	"corral/pkg/apiv1"
)

// A sandbox's public record is kept in the cluster database (store's
// records.go) for lists: recorded when its create binds, and replaced by
// the node's answer to each call through a control plane that changes it
// (noteRecord). What the node does by itself reaches it with the node's
// heartbeat (the state only). The tokens a record carries (tokenFields)
// are not kept: the database alone must open no sandbox.

// tokenFields are the fields of a sandbox's record that open it (its
// exposed ports, its envd face): a GET of the sandbox gives them, a list
// through a control plane does not.
var tokenFields = []string{"port_token", "envd_access_token"}

// withoutTokens is record b without its tokenFields; nil if b is not a
// JSON object.
func withoutTokens(b []byte) []byte {
	var fields map[string]json.RawMessage
	if len(b) == 0 || json.Unmarshal(b, &fields) != nil || fields == nil {
		return nil
	}
	for _, f := range tokenFields {
		delete(fields, f)
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil
	}
	return out
}

// recordOf is the record of sandbox id, created on node n, to bind with:
// the node's answer body when it is the native record (a native create),
// else the node's record read back (an E2B create answers in E2B's
// shape); nil when it cannot be had (the sandbox is then listed with
// what its placement says).
func (s *Server) recordOf(ctx context.Context, n store.Node, id string, body []byte) []byte {
	if isRecordOf(body, id) {
		return withoutTokens(body)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var raw json.RawMessage
	if err := s.getOnNode(ctx, n, "/v1/sandboxes/"+id, &raw); err != nil || !isRecordOf(raw, id) {
		s.log.WarnContext(ctx, "reading a new sandbox's record for lists", "op", "cluster", "sandbox", id, "node", n.ID, "err", err)
		return nil
	}
	return withoutTokens(raw)
}

// isRecordOf says whether b is sandbox id's native record.
func isRecordOf(b []byte, id string) bool {
	var sb apiv1.Sandbox
	return json.Unmarshal(b, &sb) == nil && sb.ID == id && !sb.CreatedAt.IsZero()
}

// recordJSON is sb's record as a node writes it, without its tokens.
func recordJSON(sb apiv1.Sandbox) []byte {
	b, err := json.Marshal(sb)
	if err != nil {
		return nil
	}
	return withoutTokens(b)
}

// changesRecord says whether a call on sandbox id (method, path) answers
// with the sandbox's changed record: a pause, a resume, an update (tags,
// timeout).
func changesRecord(method, path, id string) bool {
	base := "/v1/sandboxes/" + id
	switch {
	case method == http.MethodPatch:
		return path == base
	case method == http.MethodPost:
		return path == base+"/pause" || path == base+"/resume"
	}
	return false
}

// maxRecord bounds a record read from a proxied answer.
const maxRecord = 1 << 20

// noteRecord records the node's 200 answer to a call that changed
// sandbox id's record (changesRecord), and puts the body back for the
// caller.
func (s *Server) noteRecord(ctx context.Context, id string, resp *http.Response) {
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRecord+1))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
	if err != nil || len(b) > maxRecord || !isRecordOf(b, id) {
		return
	}
	if err := s.st.SetRecord(ctx, id, withoutTokens(b)); err != nil {
		s.log.Warn("recording a sandbox's changed record", "op", "cluster", "sandbox", id, "err", err)
	}
}

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }
