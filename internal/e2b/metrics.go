package e2b

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"corral/internal/errdefs"
	"corral/internal/metrics"
)

// metrics is GET /sandboxes/{id}/metrics?start=&end= (Unix seconds): the
// sandbox's samples in that window, oldest first.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	start, err := unixParam("start", q.Get("start"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	end, err := unixParam("end", q.Get("end"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	if _, err := s.liveSandbox(r); err != nil {
		s.writeError(w, err)
		return
	}
	samples, err := s.m.Metrics(r.Context(), r.PathValue("id"), start)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := []metric{}
	for _, smp := range samples {
		if !end.IsZero() && smp.Time.After(end) {
			break
		}
		out = append(out, metricOf(smp))
	}
	writeJSON(w, http.StatusOK, out)
}

// maxMetricsIDs bounds the sandboxes of one metrics call.
const maxMetricsIDs = 100

// metricsMany is GET /sandboxes/metrics?sandbox_ids=a,b: each live
// sandbox's latest sample (sandboxes unknown, ended or not yet sampled are
// left out).
func (s *Server) metricsMany(w http.ResponseWriter, r *http.Request) {
	var ids []string
	for _, v := range r.URL.Query()["sandbox_ids"] {
		ids = append(ids, strings.Split(v, ",")...)
	}
	if len(ids) == 0 || len(ids) > maxMetricsIDs {
		s.writeError(w, errdefs.Invalid("sandbox_ids", "give 1 to %d sandbox ids, got %d", maxMetricsIDs, len(ids)))
		return
	}
	out := sandboxesWithMetrics{Sandboxes: map[string]metric{}}
	for _, id := range ids {
		samples, err := s.m.Metrics(r.Context(), id, time.Time{})
		if err != nil || len(samples) == 0 {
			continue
		}
		out.Sandboxes[id] = metricOf(samples[len(samples)-1])
	}
	writeJSON(w, http.StatusOK, out)
}

// metricOf is a sample as E2B reports it: CPU in percent of all the
// sandbox's cores (Corral's is of one core).
func metricOf(smp metrics.Sample) metric {
	cpus := max(smp.CPUCount, 1)
	return metric{
		Timestamp: smp.Time.UTC().Format(time.RFC3339Nano), TimestampUnix: smp.Time.Unix(),
		CPUCount: int(math.Ceil(cpus)), CPUUsedPct: math.Round(smp.CPUPercent/cpus*100) / 100,
		MemUsed: smp.MemoryUsed, MemTotal: smp.MemoryTotal, DiskUsed: smp.DiskUsed, DiskTotal: smp.DiskTotal,
	}
}

// unixParam reads Unix seconds ("" is the zero time).
func unixParam(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 1e11 {
		return time.Time{}, errdefs.Invalid(field, "Unix seconds, got %q", truncate(v))
	}
	return time.Unix(n, 0), nil
}
