package control

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
)

// A control plane's /metrics (behind the token) is the cluster's view: its
// nodes and what is placed on them, read from the database at each scrape
// (so every control instance reports the same), and this instance's own
// creates. Each node's daemon serves its own /metrics (sandboxes, execs,
// egress) for Prometheus to scrape beside it.

// scrapeTimeout bounds the database reads of one scrape.
const scrapeTimeout = 5 * time.Second

// controlMetrics are one control instance's series.
type controlMetrics struct {
	reg      *prometheus.Registry
	creates  *prometheus.CounterVec
	placing  prometheus.Histogram
	retried  prometheus.Counter
	scrapeDB prometheus.Counter
}

func newControlMetrics(st *store.Store) *controlMetrics {
	m := &controlMetrics{
		reg: prometheus.NewRegistry(),
		creates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_cluster_creates_total",
			Help: "Creates this control instance placed, by outcome (placed, refused: the cluster is full or the request is bad, failed: the nodes tried failed)."},
			[]string{"outcome"}),
		placing: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_cluster_create_seconds",
			Help:    "Time from a create's arrival to the node's answer, placement and forwarding included.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_cluster_create_retries_total",
			Help: "Nodes a create left for another (unreachable, full, or without its image or snapshot)."}),
		scrapeDB: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_cluster_scrape_errors_total",
			Help: "Scrapes whose read of the cluster database failed (their node series are missing)."}),
	}
	m.reg.MustRegister(m.creates, m.placing, m.retried, m.scrapeDB, nodeCollector{st: st, failed: m.scrapeDB})
	return m
}

// handler serves the registry.
func (m *controlMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// createDone records a create that took since start and ended with err.
func (m *controlMetrics) createDone(start time.Time, err error) {
	outcome := "placed"
	switch {
	case err == nil:
	case errors.Is(err, errdefs.ErrUnavailable):
		outcome = "failed"
	default:
		outcome = "refused"
	}
	m.creates.WithLabelValues(outcome).Inc()
	m.placing.Observe(time.Since(start).Seconds())
}

var (
	nodesDesc = prometheus.NewDesc("corral_cluster_nodes", "Nodes by state (ready, lost) and whether they are draining.",
		[]string{"state", "draining"}, nil)
	capacityDesc = prometheus.NewDesc("corral_cluster_node_capacity", "A node's capacity (cpu in cores, memory_bytes, sandboxes).",
		[]string{"node", "resource"}, nil)
	placedDesc = prometheus.NewDesc("corral_cluster_node_placed", "What is placed on a node (cpu in cores, memory_bytes, sandboxes).",
		[]string{"node", "resource"}, nil)
)

// nodeCollector reads the nodes and their counters at each scrape.
type nodeCollector struct {
	st     *store.Store
	failed prometheus.Counter
}

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodesDesc
	ch <- capacityDesc
	ch <- placedDesc
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	ns, err := c.st.Nodes(ctx)
	var uses map[string]store.Use
	if err == nil {
		uses, err = c.st.Uses(ctx)
	}
	if err != nil {
		c.failed.Inc()
		return
	}
	type key struct{ state, draining string }
	counts := map[key]float64{{store.NodeReady, "false"}: 0, {store.NodeReady, "true"}: 0, {store.NodeLost, "false"}: 0}
	for _, n := range ns {
		drain := "false"
		if n.Draining {
			drain = "true"
		}
		counts[key{n.State, drain}]++
		u := uses[n.ID]
		for _, v := range []struct {
			res            string
			capacity, used float64
		}{
			{"cpu", float64(n.CPUMilli) / 1000, float64(u.CPUMilli) / 1000},
			{"memory_bytes", float64(n.MemoryMB) * (1 << 20), float64(u.MemoryMB) * (1 << 20)},
			{"sandboxes", float64(n.MaxSandboxes), float64(u.Sandboxes)},
		} {
			ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, v.capacity, n.ID, v.res)
			ch <- prometheus.MustNewConstMetric(placedDesc, prometheus.GaugeValue, v.used, n.ID, v.res)
		}
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, v, k.state, k.draining)
	}
}
