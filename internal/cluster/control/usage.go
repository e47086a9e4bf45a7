package control

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"corral/internal/errdefs"
	"corral/internal/usage"
	"corral/pkg/apiv1"
)

// Each node ships its sandboxes' usage to the cluster database (package
// node, ship.go): the settled record about a second after a sandbox ends,
// a live one's running figures every few seconds. A control plane adds up
// the records there, as a daemon adds up its own, so a lost node's
// sandboxes count (with the figures last shipped) and a report asks no
// node.

// maxUsageRecords bounds the records one report adds up (as a daemon's).
const maxUsageRecords = 100_000

// usage is GET /v1/usage?from=&to=&group_by= through a control plane:
// the usage of the sandboxes that ran in the window (from: default 24
// hours ago; to: default now), grouped by sandbox, runtime or tag:KEY.
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, err := timeParam("from", q.Get("from"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	if q.Get("from") == "" {
		from = time.Now().Add(-24 * time.Hour)
	}
	to, err := timeParam("to", q.Get("to"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	by := q.Get("group_by")
	if err := usage.ParseBy(by); err != nil {
		s.writeError(w, fmt.Errorf("%w: %v", errdefs.ErrInvalidArgument, err))
		return
	}
	if !to.IsZero() && !to.After(from) {
		s.writeError(w, errdefs.Invalid("to", "must be after from"))
		return
	}
	recs, err := s.st.ListUsage(r.Context(), from, to, maxUsageRecords)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.UsageReport{From: from.UTC(), GroupBy: by, Groups: []apiv1.UsageGroup{}}
	if !to.IsZero() {
		t := to.UTC()
		out.To = &t
	}
	for _, g := range usage.GroupBy(joinMoved(recs), by) {
		out.Groups = append(out.Groups, apiv1.UsageGroup{Key: g.Key, Sandboxes: g.Sandboxes, Usage: apiv1.Usage(g.Totals)})
	}
	writeJSON(w, http.StatusOK, out)
}

// timeParam reads an optional time parameter: RFC 3339 or Unix seconds
// (a daemon's forms).
func timeParam(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1e11 {
		return time.Time{}, errdefs.Invalid(name, "an RFC 3339 time or Unix seconds, got %.64q", v)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// joinMoved makes one record of each sandbox's records on several nodes
// (a sandbox moved by a drain): its usage on each added up, the larger
// peaks, from its first start to its last end (none while it lives on).
func joinMoved(recs []usage.Record) []usage.Record {
	idx := make(map[string]int, len(recs))
	out := recs[:0:0]
	for _, r := range recs {
		i, ok := idx[r.SandboxID]
		if !ok {
			idx[r.SandboxID] = len(out)
			out = append(out, r)
			continue
		}
		j := &out[i]
		if r.StartedAt.Before(j.StartedAt) {
			j.StartedAt = r.StartedAt
		}
		if j.EndedAt.IsZero() || r.EndedAt.IsZero() {
			j.EndedAt = time.Time{}
		} else if r.EndedAt.After(j.EndedAt) {
			j.EndedAt = r.EndedAt
		}
		t, u := &j.Totals, r.Totals
		t.CPUSeconds += u.CPUSeconds
		t.CPUBurstSeconds += u.CPUBurstSeconds
		t.MemoryRequestedGiBSeconds += u.MemoryRequestedGiBSeconds
		t.MemoryUsedGiBSeconds += u.MemoryUsedGiBSeconds
		t.MemoryPeakBytes = max(t.MemoryPeakBytes, u.MemoryPeakBytes)
		t.NetInBytes += u.NetInBytes
		t.NetOutBytes += u.NetOutBytes
		t.DiskPeakBytes = max(t.DiskPeakBytes, u.DiskPeakBytes)
		t.DiskQuotaBytes = max(t.DiskQuotaBytes, u.DiskQuotaBytes)
		t.RunningSeconds += u.RunningSeconds
		t.PausedSeconds += u.PausedSeconds
	}
	return out
}
