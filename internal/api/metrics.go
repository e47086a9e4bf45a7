package api

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// sandboxMetrics is GET /v1/sandboxes/{id}/metrics?since=: the sandbox's
// samples taken after since (RFC 3339, or Unix seconds), oldest first.
func (s *Server) sandboxMetrics(w http.ResponseWriter, r *http.Request) {
	since, err := sinceParam(r.URL.Query().Get("since"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	samples, err := s.m.Metrics(r.Context(), r.PathValue("id"), since)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.Metrics{Interval: s.m.MetricsInterval().Seconds(), Samples: []apiv1.MetricSample{}}
	for _, smp := range samples {
		out.Samples = append(out.Samples, apiv1.MetricSample{Time: smp.Time.UTC(), CPUPercent: math.Round(smp.CPUPercent*100) / 100,
			CPUCount: smp.CPUCount, MemoryUsed: smp.MemoryUsed, MemoryTotal: smp.MemoryTotal, DiskUsed: smp.DiskUsed, DiskTotal: smp.DiskTotal})
	}
	writeJSON(w, http.StatusOK, out)
}

// sinceParam reads a time as RFC 3339 or Unix seconds ("" is the zero
// time: everything).
func sinceParam(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1e11 {
		return time.Time{}, errdefs.Invalid("since", "an RFC 3339 time or Unix seconds, got %q", v)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}
