package control

import (
	"encoding/json"
	"net/http"
	"time"

	"corral/internal/cluster/store"
	"corral/pkg/apiv1"
)

// partialHeader names the nodes a merged answer (usage, audit, E2B's
// lists) is missing (they did not answer), so a caller can tell a short
// answer from a partial one.
const partialHeader = "X-Corral-Missing-Nodes"

// list is GET /v1/sandboxes: a page of the sandboxes placed through the
// control planes, read from the cluster database (store.ListSandboxes),
// with a node's query and answer: no node is asked. Each is its record
// as last recorded, in its state as its node last said it; one whose
// node was lost is listed as lost.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	f, err := readListFilter(r.URL.Query())
	if err != nil {
		s.writeError(w, err)
		return
	}
	ls, next, err := s.st.ListSandboxes(r.Context(), f)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.SandboxList{Sandboxes: make([]apiv1.Sandbox, 0, len(ls)), Next: cursorToken(next)}
	for _, l := range ls {
		out.Sandboxes = append(out.Sandboxes, listedSandbox(l))
	}
	writeJSON(w, http.StatusOK, out)
}

// listedSandbox is l as a list shows it: its recorded record, or what its
// placement says of it when it was bound without one, in its list state.
func listedSandbox(l store.Listed) apiv1.Sandbox {
	var sb apiv1.Sandbox
	if l.Record == nil || json.Unmarshal(l.Record, &sb) != nil || sb.ID != l.ID {
		sb = apiv1.Sandbox{ID: l.ID, Name: l.Name, Runtime: l.Runtime, CPU: float64(l.CPUMilli) / 1000,
			MemoryMB: l.MemoryMB, DiskMB: l.DiskMB, CreatedAt: time.Unix(0, l.CreatedNS).UTC()}
	}
	sb.State = l.State
	return sb
}
