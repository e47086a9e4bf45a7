package envd

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// envs is GET /envs: the environment a process in the sandbox gets by
// default, the variables its create set (E2B's envVars), as one JSON
// object.
func (s *Server) envs(w http.ResponseWriter, r *http.Request) {
	sb, err := s.m.Get(r.Context(), sandboxID(r.Header))
	if err != nil || sb.State != sandbox.Running {
		writeError(w, errBadGateway)
		return
	}
	out := map[string]string{}
	for k, v := range sb.Spec.Env {
		out[k] = v
	}
	writeJSON(w, http.StatusOK, out)
}

// envdMetrics is envd's Metrics: the sandbox's resource use, CPU in
// percent of all its cores.
type envdMetrics struct {
	TS          int64   `json:"ts"`
	CPUCount    int     `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotal    uint64  `json:"mem_total"`
	MemUsed     uint64  `json:"mem_used"`
	MemTotalMiB uint64  `json:"mem_total_mib"`
	MemUsedMiB  uint64  `json:"mem_used_mib"`
	DiskUsed    uint64  `json:"disk_used"`
	DiskTotal   uint64  `json:"disk_total"`
}

// metrics is GET /metrics: the daemon's latest sample of the sandbox
// (measured on the host every --metrics-interval, not asked of the
// guest); 503 until there is one, or with sampling off. envd's mem_cache
// has no counterpart and is left out.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r.Header)
	sb, err := s.m.Get(r.Context(), id)
	if err != nil || sb.State != sandbox.Running {
		writeError(w, errBadGateway)
		return
	}
	samples, err := s.m.Metrics(r.Context(), id, time.Time{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(samples) == 0 {
		s.fail(w, r, fmt.Errorf("%w: no metrics sample of the sandbox yet (the daemon samples every %s; 0 is off)",
			errdefs.ErrUnavailable, s.m.MetricsInterval()))
		return
	}
	smp := samples[len(samples)-1]
	cpus := max(smp.CPUCount, 1)
	writeJSON(w, http.StatusOK, envdMetrics{
		TS: smp.Time.Unix(), CPUCount: int(math.Ceil(cpus)), CPUUsedPct: math.Round(smp.CPUPercent/cpus*100) / 100,
		MemTotal: smp.MemoryTotal, MemUsed: smp.MemoryUsed, MemTotalMiB: smp.MemoryTotal >> 20, MemUsedMiB: smp.MemoryUsed >> 20,
		DiskUsed: smp.DiskUsed, DiskTotal: smp.DiskTotal,
	})
}
