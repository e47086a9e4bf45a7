package control

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// Each node keeps its own audit trail, a hash chain of what happened
// there; a control plane does not copy them. Through it, GET /v1/audit
// merges the nodes' pages oldest first, each entry naming its node, and
// its next token holds every node's position; verify walks every node's
// chain; export streams every node's trail in turn. A sandbox filter
// asks only the sandbox's node.

// auditTokenPrefix marks a control plane's audit token (a node's is a
// sequence number).
const auditTokenPrefix = "c1."

// maxAuditToken bounds the token a caller sends back.
const maxAuditToken = 64 << 10

// auditMaxPage and auditDefaultPage are a node's bounds (audit.MaxPage
// and the API's default).
const (
	auditMaxPage     = 1000
	auditDefaultPage = 100
)

// auditPage is GET /v1/audit through a control plane.
func (s *Server) auditPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := auditDefaultPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > auditMaxPage {
			s.writeError(w, errdefs.Invalid("limit", "must be 1 to %d, got %.64q", auditMaxPage, v))
			return
		}
		limit = n
	}
	after, err := readAuditToken(q.Get("after"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	ns, err := s.auditNodes(r.Context(), q.Get("sandbox"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	pages, missing, err := s.auditFromNodes(r.Context(), ns, q, limit, after)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if len(missing) > 0 {
		w.Header().Set(partialHeader, strings.Join(missing, ","))
	}
	writeJSON(w, http.StatusOK, mergeAudit(pages, after, limit))
}

// auditNodes are the nodes to ask: the sandbox's (by id or name), or
// every ready one.
func (s *Server) auditNodes(ctx context.Context, sandbox string) ([]store.Node, error) {
	if sandbox != "" {
		p, err := s.st.Lookup(ctx, sandbox)
		if err != nil {
			return nil, err
		}
		return []store.Node{p.Node}, nil
	}
	ns, err := s.st.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	var ready []store.Node
	for _, n := range ns {
		if n.State == store.NodeReady {
			ready = append(ready, n)
		}
	}
	return ready, nil
}

// auditFromNodes asks each node for a page of limit after its position.
// A node's refusal of the query (a 4xx) is the answer; nodes that do not
// answer are returned as missing.
func (s *Server) auditFromNodes(ctx context.Context, ns []store.Node, q url.Values, limit int, after map[string]int64) (map[string]apiv1.AuditPage, []string, error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	pages := map[string]apiv1.AuditPage{}
	var missing []string
	var refused error
	for _, n := range ns {
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("limit", strconv.Itoa(limit))
		nq.Del("after")
		if a := after[n.ID]; a > 0 {
			nq.Set("after", strconv.FormatInt(a, 10))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := s.callNode(ctx, n, http.MethodGet, "/v1/audit?"+nq.Encode(), nil, "")
			var page apiv1.AuditPage
			if err == nil {
				err = a.decode(&page)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				pages[n.ID] = page
			case a.status >= 400 && a.status < 500:
				refused = err
			default:
				s.log.WarnContext(ctx, "a node's audit trail failed", "op", "cluster", "node", n.ID, "err", err)
				missing = append(missing, n.ID)
			}
		}()
	}
	wg.Wait()
	if refused != nil {
		return nil, nil, refused
	}
	sort.Strings(missing)
	return pages, missing, nil
}

// mergeAudit takes the limit oldest entries of the nodes' pages (each
// node's in its own order, so each node's taken entries are a prefix of
// its page) and, when any node has more, the token of every node's new
// position.
func mergeAudit(pages map[string]apiv1.AuditPage, after map[string]int64, limit int) apiv1.NodeAuditPage {
	nodes := make([]string, 0, len(pages))
	for n := range pages {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	next := map[string]int{}
	pos := map[string]int64{}
	for n, a := range after {
		pos[n] = a
	}
	out := apiv1.NodeAuditPage{Entries: []apiv1.NodeAuditEntry{}}
	for len(out.Entries) < limit {
		best := ""
		for _, n := range nodes {
			i := next[n]
			if i >= len(pages[n].Entries) {
				continue
			}
			if best == "" || pages[n].Entries[i].Time.Before(pages[best].Entries[next[best]].Time) {
				best = n
			}
		}
		if best == "" {
			break
		}
		e := pages[best].Entries[next[best]]
		next[best]++
		pos[best] = e.Seq
		out.Entries = append(out.Entries, apiv1.NodeAuditEntry{Node: best, AuditEntry: e})
	}
	for _, n := range nodes {
		if next[n] < len(pages[n].Entries) || pages[n].Next != "" {
			out.Next = writeAuditToken(pos)
			break
		}
	}
	return out
}

func writeAuditToken(pos map[string]int64) string {
	b, _ := json.Marshal(pos)
	return auditTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// readAuditToken reads after= (a control plane's next token; "" is the
// start).
func readAuditToken(v string) (map[string]int64, error) {
	if v == "" {
		return map[string]int64{}, nil
	}
	bad := errdefs.Invalid("after", "want the next token of a control plane's page, got %.64q", v)
	enc, ok := strings.CutPrefix(v, auditTokenPrefix)
	if !ok || len(v) > maxAuditToken {
		return nil, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, bad
	}
	pos := map[string]int64{}
	if err := json.Unmarshal(b, &pos); err != nil {
		return nil, bad
	}
	for _, a := range pos {
		if a < 0 {
			return nil, bad
		}
	}
	return pos, nil
}

// auditVerify is GET /v1/audit/verify through a control plane: every
// ready node walks its own chain; a node that does not answer is a break.
func (s *Server) auditVerify(w http.ResponseWriter, r *http.Request) {
	ns, err := s.auditNodes(r.Context(), "")
	if err != nil {
		s.writeError(w, err)
		return
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	reps := map[string]apiv1.AuditReport{}
	failed := map[string]error{}
	for _, n := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := s.callNode(r.Context(), n, http.MethodGet, "/v1/audit/verify", nil, "")
			var rep apiv1.AuditReport
			if err == nil {
				err = a.decode(&rep)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[n.ID] = err
				return
			}
			reps[n.ID] = rep
		}()
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, sumAudit(reps, failed))
}

// sumAudit is the cluster's report: each node's, their entries summed, OK
// when every node verified whole; Broken is the first node's (by id)
// break, naming the node.
func sumAudit(reps map[string]apiv1.AuditReport, failed map[string]error) apiv1.AuditReport {
	out := apiv1.AuditReport{OK: len(failed) == 0, Nodes: reps}
	ids := make([]string, 0, len(reps)+len(failed))
	for n, rep := range reps {
		ids = append(ids, n)
		out.Entries += rep.Entries
	}
	for n := range failed {
		ids = append(ids, n)
	}
	sort.Strings(ids)
	for _, n := range ids {
		if err, ok := failed[n]; ok {
			out.Broken = &apiv1.AuditBreak{Problem: "unverified", Detail: fmt.Sprintf("node %s: %v", n, err)}
			break
		}
		if b := reps[n].Broken; b != nil {
			out.OK = false
			out.Broken = &apiv1.AuditBreak{Seq: b.Seq, Problem: b.Problem, Detail: "node " + n + ": " + b.Detail}
			break
		}
	}
	return out
}

// auditExport is GET /v1/audit/export through a control plane: every
// node's selected entries in turn (nodes by id), each line a node's entry
// as stored with its node named; a line-by-line verify is then per node.
func (s *Server) auditExport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if _, err := readAuditToken(q.Get("after")); err != nil {
		s.writeError(w, err)
		return
	}
	ns, err := s.auditNodes(r.Context(), q.Get("sandbox"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].ID < ns[j].ID })
	q.Del("after")
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, n := range ns {
		if err := s.exportNode(r.Context(), n, q, enc); err != nil {
			// The status is sent; a cut stream is all the caller can see.
			s.log.WarnContext(r.Context(), "exporting a node's audit trail", "op", "cluster", "node", n.ID, "err", err)
			return
		}
	}
}

// exportNode copies node n's export into enc, each entry with the node.
func (s *Server) exportNode(ctx context.Context, n store.Node, q url.Values, enc *json.Encoder) error {
	target, cred, err := s.nodeTarget(n)
	if err != nil {
		return err
	}
	u := target.JoinPath("/v1/audit/export")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set(nodeauth.Header, cred)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %s answered %d", n.ID, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e apiv1.AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return err
		}
		if err := enc.Encode(apiv1.NodeAuditEntry{Node: n.ID, AuditEntry: e}); err != nil {
			return err
		}
	}
	return sc.Err()
}
