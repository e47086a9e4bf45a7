package control

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
)

// Bounds of an E2B list page (the node's: E2B's default of 100, at most
// 1,000).
const (
	e2bDefaultLimit = 100
	e2bMaxLimit     = 1000
)

// e2bCursor is the control plane's X-Next-Token: the node the next page
// starts on and that node's own token ("" from its first sandbox). Nodes
// are taken in the order of their ids, each node's sandboxes in its own
// order (oldest first), so a page never repeats or skips a sandbox that
// stays: the node's token is a position, not an offset.
type e2bCursor struct {
	Node string `json:"n"`
	Next string `json:"t,omitempty"`
}

func (c e2bCursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseE2BCursor(tok string) (e2bCursor, error) {
	var c e2bCursor
	if tok == "" {
		return c, nil
	}
	bad := errdefs.Invalid("nextToken", "is not a token this API gave")
	if len(tok) > 1024 {
		return c, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || json.Unmarshal(raw, &c) != nil || c.Node == "" {
		return e2bCursor{}, bad
	}
	return c, nil
}

// nodeRefusal is a node's 4xx to a list: the caller's query is at fault,
// and the node's E2B error is relayed as it is.
type nodeRefusal struct{ a nodeAnswer }

func (e *nodeRefusal) Error() string { return fmt.Sprintf("status %d: %s", e.a.status, e.a.body) }

// e2bListV2 is GET /v2/sandboxes: one page of the cluster's sandboxes,
// filled from the ready nodes in turn, its token in X-Next-Token (none
// on the last page). A page may come out short where a node's
// sandboxes end; a node that does not answer is left out and named in
// X-Corral-Missing-Nodes. X-Total-Running is not given.
func (s *Server) e2bListV2(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := e2bDefaultLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > e2bMaxLimit {
			s.e2bError(w, errdefs.Invalid("limit", "must be between 1 and %d, got %q", e2bMaxLimit, l))
			return
		}
		limit = n
	}
	cur, err := parseE2BCursor(q.Get("nextToken"))
	if err != nil {
		s.e2bError(w, err)
		return
	}
	ns, err := s.readyNodes(r)
	if err != nil {
		s.e2bError(w, err)
		return
	}
	out := []json.RawMessage{}
	var next e2bCursor
	var missing []string
	for i, n := range ns {
		if n.ID < cur.Node {
			continue
		}
		tok := ""
		if n.ID == cur.Node {
			tok = cur.Next
		}
		left := limit - len(out)
		if left == 0 {
			// The page is full at a node's boundary: a token only if
			// a later node has more, so the last page is not empty.
			if s.e2bAnyLeft(r, ns[i:], q) {
				next = e2bCursor{Node: n.ID}
			}
			break
		}
		nq := cloneQuery(q)
		nq.Set("limit", strconv.Itoa(left))
		nq.Del("nextToken")
		if tok != "" {
			nq.Set("nextToken", tok)
		}
		items, nodeNext, err := s.e2bListNode(r, n, "/e2b/v2/sandboxes", nq)
		var ref *nodeRefusal
		switch {
		case errors.As(err, &ref):
			relay(w, ref.a)
			return
		case err != nil:
			s.log.WarnContext(r.Context(), "a node's e2b list failed", "op", "cluster", "node", n.ID, "err", err)
			missing = append(missing, n.ID)
			continue
		}
		out = append(out, items...)
		if nodeNext != "" {
			next = e2bCursor{Node: n.ID, Next: nodeNext}
			break
		}
	}
	if next.Node != "" {
		w.Header().Set("X-Next-Token", next.String())
	}
	if len(missing) > 0 {
		w.Header().Set(partialHeader, strings.Join(missing, ","))
	}
	writeJSON(w, http.StatusOK, out)
}

// e2bAnyLeft tells whether any of ns lists a sandbox for query q (each
// asked for one, in turn); a node that does not answer counts as having
// some, so the caller is given a token rather than a list cut short.
func (s *Server) e2bAnyLeft(r *http.Request, ns []store.Node, q url.Values) bool {
	nq := cloneQuery(q)
	nq.Set("limit", "1")
	nq.Del("nextToken")
	for _, n := range ns {
		items, _, err := s.e2bListNode(r, n, "/e2b/v2/sandboxes", nq)
		if err != nil || len(items) > 0 {
			return true
		}
	}
	return false
}

// e2bListV1 is GET /sandboxes: every running sandbox of every ready
// node, asked at once.
func (s *Server) e2bListV1(w http.ResponseWriter, r *http.Request) {
	ns, err := s.readyNodes(r)
	if err != nil {
		s.e2bError(w, err)
		return
	}
	lists := make([][]json.RawMessage, len(ns))
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() { lists[i], _, errs[i] = s.e2bListNode(r, n, "/e2b/sandboxes", r.URL.Query()) })
	}
	wg.Wait()
	out := []json.RawMessage{}
	var missing []string
	for i, err := range errs {
		var ref *nodeRefusal
		switch {
		case errors.As(err, &ref):
			relay(w, ref.a)
			return
		case err != nil:
			s.log.WarnContext(r.Context(), "a node's e2b list failed", "op", "cluster", "node", ns[i].ID, "err", err)
			missing = append(missing, ns[i].ID)
		}
		out = append(out, lists[i]...)
	}
	if len(missing) > 0 {
		w.Header().Set(partialHeader, strings.Join(missing, ","))
	}
	writeJSON(w, http.StatusOK, out)
}

// readyNodes are the nodes a list asks, in the order of their ids.
func (s *Server) readyNodes(r *http.Request) ([]store.Node, error) {
	all, err := s.st.Nodes(r.Context())
	if err != nil {
		return nil, err
	}
	var ns []store.Node
	for _, n := range all {
		if n.State == store.NodeReady {
			ns = append(ns, n)
		}
	}
	return ns, nil
}

func cloneQuery(q url.Values) url.Values {
	c := url.Values{}
	for k, v := range q {
		c[k] = append([]string(nil), v...)
	}
	return c
}

// e2bListNode asks node n for a list at path with query q: its items and
// its X-Next-Token.
func (s *Server) e2bListNode(r *http.Request, n store.Node, path string, q url.Values) ([]json.RawMessage, string, error) {
	target, cred, err := s.nodeTarget(n)
	if err != nil {
		return nil, "", err
	}
	u := target.JoinPath(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set(nodeauth.Header, cred)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		a := nodeAnswer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusUnauthorized {
			return nil, "", &nodeRefusal{a}
		}
		return nil, "", fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var items []json.RawMessage
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&items); err != nil {
		return nil, "", err
	}
	return items, resp.Header.Get("X-Next-Token"), nil
}
