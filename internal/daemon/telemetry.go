package daemon

import (
	"net/http"

	"corral/internal/records"
	"corral/internal/sandbox"
	"corral/internal/telemetry"
)

// newTelemetry makes the daemon's Prometheus series (internal/telemetry)
// and has the records store report its latency to them; the manager gets
// them through its Config, and the gauges read the manager once it exists.
func newTelemetry(cfg Config, st *records.Store) *telemetry.Metrics {
	tel := telemetry.New(cfg.Version, sandbox.Runtimes)
	st.SetObserver(tel.StoreOp)
	return tel
}

// metricsFace is the --metrics-listen listener's handler: /metrics with
// no token (the operator chose an address only the monitoring reaches),
// nil when the flag is not set (/metrics is then on the API listener,
// behind the token).
func metricsFace(cfg Config, tel *telemetry.Metrics) http.Handler {
	if cfg.MetricsListen == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", tel.Handler())
	return mux
}
