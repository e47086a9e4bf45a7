package control

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"corral/internal/cluster/store"
	"corral/pkg/apiv1"
)

// Usage is metered and kept where a sandbox ran (each node's records), so
// the cluster's report is every ready node's report for the same window
// and grouping, merged: the sandboxes of one group on several nodes are
// one group. A node that does not answer is left out and named in
// partialHeader, as for lists.

// usage is GET /v1/usage through a control plane. The query goes to each
// node as it came (the node validates it: a bad one is a node's 400).
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	reports, missing, err := s.usageFromNodes(r.Context(), r.URL.Query())
	if err != nil {
		s.writeError(w, err)
		return
	}
	if len(missing) > 0 {
		w.Header().Set(partialHeader, strings.Join(missing, ","))
	}
	writeJSON(w, http.StatusOK, mergeUsage(reports))
}

// usageFromNodes asks every ready node for its report at once. The first
// refusal of the query (a 4xx) is the answer; nodes that do not answer
// are returned as missing.
func (s *Server) usageFromNodes(ctx context.Context, q url.Values) ([]apiv1.UsageReport, []string, error) {
	ns, err := s.st.Nodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var reports []apiv1.UsageReport
	var missing []string
	var refused error
	for _, n := range ns {
		if n.State != store.NodeReady {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := s.callNode(ctx, n, http.MethodGet, "/v1/usage?"+q.Encode(), nil, "")
			var rep apiv1.UsageReport
			if err == nil {
				err = a.decode(&rep)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				reports = append(reports, rep)
			case a.status >= 400 && a.status < 500:
				refused = err
			default:
				s.log.WarnContext(ctx, "a node's usage report failed", "op", "cluster", "node", n.ID, "err", err)
				missing = append(missing, n.ID)
			}
		}()
	}
	wg.Wait()
	if refused != nil {
		return nil, nil, refused
	}
	sort.Strings(missing)
	return reports, missing, nil
}

// mergeUsage adds the nodes' reports group by group: sums, the largest
// peaks, and the average working set from the sums (as a node computes
// it); groups in a node's order (the most CPU first).
func mergeUsage(reports []apiv1.UsageReport) apiv1.UsageReport {
	out := apiv1.UsageReport{Groups: []apiv1.UsageGroup{}}
	byKey := map[string]*apiv1.UsageGroup{}
	for i, rep := range reports {
		if i == 0 {
			out.From, out.To, out.GroupBy = rep.From, rep.To, rep.GroupBy
		}
		out.From = earliest(out.From, rep.From)
		for _, g := range rep.Groups {
			m := byKey[g.Key]
			if m == nil {
				m = &apiv1.UsageGroup{Key: g.Key}
				byKey[g.Key] = m
			}
			m.Sandboxes += g.Sandboxes
			addUsage(&m.Usage, g.Usage)
		}
	}
	for _, g := range byKey {
		if g.RunningSeconds > 0 {
			g.MemoryAvgBytes = uint64(g.MemoryUsedGiBSeconds / g.RunningSeconds * (1 << 30))
		}
		out.Groups = append(out.Groups, *g)
	}
	sort.Slice(out.Groups, func(i, j int) bool {
		a, b := out.Groups[i], out.Groups[j]
		if a.CPUSeconds != b.CPUSeconds {
			return a.CPUSeconds > b.CPUSeconds
		}
		return a.Key < b.Key
	})
	return out
}

// addUsage adds u into t, keeping the larger peaks (the average is
// mergeUsage's).
func addUsage(t *apiv1.Usage, u apiv1.Usage) {
	t.CPUSeconds += u.CPUSeconds
	t.CPUBurstSeconds += u.CPUBurstSeconds
	t.MemoryRequestedGiBSeconds += u.MemoryRequestedGiBSeconds
	t.MemoryUsedGiBSeconds += u.MemoryUsedGiBSeconds
	t.MemoryPeakBytes = max(t.MemoryPeakBytes, u.MemoryPeakBytes)
	t.NetInBytes += u.NetInBytes
	t.NetOutBytes += u.NetOutBytes
	t.DiskPeakBytes = max(t.DiskPeakBytes, u.DiskPeakBytes)
	t.DiskQuotaBytes += u.DiskQuotaBytes
	t.RunningSeconds += u.RunningSeconds
	t.PausedSeconds += u.PausedSeconds
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}
