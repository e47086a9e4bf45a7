package control

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
)

// e2bMaxMetricsIDs bounds the sandboxes of one metrics call (the node's
// own bound).
const e2bMaxMetricsIDs = 100

// e2bMetricsIDs reads sandbox_ids (repeated or comma-separated), each
// once, 1 to e2bMaxMetricsIDs of them.
func e2bMetricsIDs(q url.Values) ([]string, error) {
	var ids []string
	for _, v := range q["sandbox_ids"] {
		for id := range strings.SplitSeq(v, ",") {
			if id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 || len(ids) > e2bMaxMetricsIDs {
		return nil, errdefs.Invalid("sandbox_ids", "give 1 to %d sandbox ids, got %d", e2bMaxMetricsIDs, len(ids))
	}
	return ids, nil
}

// e2bMetricsMany is GET /sandboxes/metrics?sandbox_ids=a,b: the ids
// grouped by the node that runs each, every node asked at once for its
// own, the answers merged. As on a node, a sandbox unknown, not placed (ended, lost) or
// not yet sampled is left out, and so are those of a node that does not
// answer (named in X-Corral-Missing-Nodes).
func (s *Server) e2bMetricsMany(w http.ResponseWriter, r *http.Request) {
	ids, err := e2bMetricsIDs(r.URL.Query())
	if err != nil {
		s.e2bError(w, err)
		return
	}
	byNode := map[string][]string{}
	nodes := map[string]store.Node{}
	for _, id := range ids {
		p, err := s.st.Lookup(r.Context(), id)
		if errors.Is(err, errdefs.ErrNotFound) || err == nil && p.State != store.Placed {
			continue
		}
		if err != nil {
			s.e2bError(w, err)
			return
		}
		byNode[p.Node.ID] = append(byNode[p.Node.ID], id)
		nodes[p.Node.ID] = p.Node
	}
	out := struct {
		Sandboxes map[string]json.RawMessage `json:"sandboxes"`
	}{Sandboxes: map[string]json.RawMessage{}}
	var mu sync.Mutex
	var missing []string
	var wg sync.WaitGroup
	for nid, nids := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.e2bNodeMetrics(r.Context(), nodes[nid], nids)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.log.WarnContext(r.Context(), "a node's e2b metrics", "op", "cluster", "node", nid, "err", err)
				missing = append(missing, nid)
				return
			}
			for id, m := range got {
				if slices.Contains(nids, id) {
					out.Sandboxes[id] = m
				}
			}
		}()
	}
	wg.Wait()
	if len(missing) > 0 {
		slices.Sort(missing)
		w.Header().Set("X-Corral-Missing-Nodes", strings.Join(missing, ","))
	}
	writeJSON(w, http.StatusOK, out)
}

// e2bNodeMetrics asks node n's E2B face for the latest samples of ids.
func (s *Server) e2bNodeMetrics(ctx context.Context, n store.Node, ids []string) (map[string]json.RawMessage, error) {
	q := url.Values{"sandbox_ids": {strings.Join(ids, ",")}}
	a, err := s.callNode(ctx, n, http.MethodGet, "/e2b/sandboxes/metrics?"+q.Encode(), nil, "")
	if err == nil {
		err = e2bAnswerErr(a)
	}
	if err != nil {
		return nil, err
	}
	var got struct {
		Sandboxes map[string]json.RawMessage `json:"sandboxes"`
	}
	if err := json.Unmarshal(a.body, &got); err != nil {
		return nil, err
	}
	return got.Sandboxes, nil
}
