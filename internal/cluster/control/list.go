package control

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/pkg/apiv1"
)

// partialHeader names the nodes a merged list is missing (they did not
// answer), so a caller can tell a short list from a partial one.
const partialHeader = "X-Corral-Missing-Nodes"

// list merges the lists of every ready node, asked at once with the
// caller's query, into one page (merge): each node gives its page of the
// same size after the same position, and the merged page's next token
// continues all of them. A node that does not answer is left out of the
// page and named in partialHeader.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	page, err := readListPage(r.URL.Query())
	if err != nil {
		s.writeError(w, err)
		return
	}
	ns, err := s.st.Nodes(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var pages []apiv1.SandboxList
	var missing []string
	for _, n := range ns {
		if n.State != store.NodeReady {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.listNode(r, n, page)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.log.WarnContext(r.Context(), "a node's list failed", "op", "cluster", "node", n.ID, "err", err)
				missing = append(missing, n.ID)
				return
			}
			pages = append(pages, l)
		}()
	}
	wg.Wait()
	if len(missing) > 0 {
		w.Header().Set(partialHeader, strings.Join(missing, ","))
	}
	writeJSON(w, http.StatusOK, merge(pages, page.limit))
}

func (s *Server) listNode(r *http.Request, n store.Node, page listPage) (apiv1.SandboxList, error) {
	target, cred, err := s.nodeTarget(n)
	if err != nil {
		return apiv1.SandboxList{}, err
	}
	u := target.JoinPath("/v1/sandboxes")
	q := r.URL.Query()
	q.Set("limit", strconv.Itoa(page.limit))
	if page.next != "" {
		q.Set("next", page.next)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return apiv1.SandboxList{}, err
	}
	req.Header.Set(nodeauth.Header, cred)
	resp, err := s.client.Do(req)
	if err != nil {
		return apiv1.SandboxList{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return apiv1.SandboxList{}, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var l apiv1.SandboxList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return apiv1.SandboxList{}, err
	}
	return l, nil
}
