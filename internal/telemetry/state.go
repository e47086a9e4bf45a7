package telemetry

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// State is what the gauges read at each scrape: the live sandboxes by
// state and runtime, and the warm pools.
type State struct {
	Sandboxes []SandboxCount
	Pools     []Pool
}

// SandboxCount is how many live sandboxes are in State on Runtime.
type SandboxCount struct {
	State, Runtime string
	N              int
}

// Pool is one warm pool: its spec's runtime and image, its target size,
// the sandboxes ready in it, and the creates it served (hits) or could
// not (misses) since the daemon started.
type Pool struct {
	Runtime, Image string
	Size, Ready    int
	Hits, Misses   int64
}

var (
	sandboxesDesc = prometheus.NewDesc(Namespace+"_sandboxes", "Live sandboxes by state and runtime (warm pools' waiting sandboxes not included).",
		[]string{"state", "runtime"}, nil)
	poolLabels    = []string{"pool", "runtime", "image"}
	poolSizeDesc  = prometheus.NewDesc(Namespace+"_warm_pool_size", "A warm pool's target size.", poolLabels, nil)
	poolReadyDesc = prometheus.NewDesc(Namespace+"_warm_pool_ready", "Sandboxes ready in a warm pool now.", poolLabels, nil)
	poolHitsDesc  = prometheus.NewDesc(Namespace+"_warm_pool_hits_total", "Creates a warm pool served.", poolLabels, nil)
	poolMissDesc  = prometheus.NewDesc(Namespace+"_warm_pool_misses_total", "Creates that fit a warm pool and found none ready.", poolLabels, nil)
)

// Observe installs read, called at each scrape for the gauges; call it
// once, before serving.
func (m *Metrics) Observe(read func() State) {
	if m == nil {
		return
	}
	m.reg.MustRegister(stateCollector{read})
}

// stateCollector turns a State into const metrics at scrape time: the
// manager already keeps these figures, so nothing has to keep a copy in
// step with them.
type stateCollector struct{ read func() State }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sandboxesDesc, poolSizeDesc, poolReadyDesc, poolHitsDesc, poolMissDesc} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.read()
	for _, s := range st.Sandboxes {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(s.N), s.State, s.Runtime)
	}
	for i, p := range st.Pools {
		l := []string{strconv.Itoa(i), p.Runtime, p.Image}
		ch <- prometheus.MustNewConstMetric(poolSizeDesc, prometheus.GaugeValue, float64(p.Size), l...)
		ch <- prometheus.MustNewConstMetric(poolReadyDesc, prometheus.GaugeValue, float64(p.Ready), l...)
		ch <- prometheus.MustNewConstMetric(poolHitsDesc, prometheus.CounterValue, float64(p.Hits), l...)
		ch <- prometheus.MustNewConstMetric(poolMissDesc, prometheus.CounterValue, float64(p.Misses), l...)
	}
}
