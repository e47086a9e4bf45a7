// Package telemetry owns the daemon's Prometheus registry and every series
// it exports (all named corral_..., plus the Go runtime's and the
// process's): the manager, the records and the daemon report through the
// small hook methods of Metrics, and read-at-scrape gauges come from a
// State function the daemon installs (Observe). Nothing else imports
// client_golang.
//
// A nil *Metrics is valid and records nothing, so a manager or a store
// built without one (tests, tools) pays nothing. It imports no Corral
// package: callers hand it plain strings, durations and errors' codes.
package telemetry

import (
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every series of Corral's own.
const Namespace = "corral"

// Create sources: how a create got its sandbox.
const (
	SourceCold     = "cold"     // started from an image
	SourcePool     = "pool"     // claimed from a warm pool
	SourceSnapshot = "snapshot" // started as a copy of a memory snapshot
)

// Metrics is the registry and the series the daemon's parts report to.
// Its methods are safe for concurrent use and on a nil receiver.
type Metrics struct {
	reg            *prometheus.Registry
	creates        *prometheus.CounterVec
	createFailures *prometheus.CounterVec
	tti            *prometheus.HistogramVec
	execStart      *prometheus.HistogramVec
	egress         *prometheus.CounterVec
	reconnects     prometheus.Counter
	store          *prometheus.HistogramVec
	runtimes       []string // label values a runtime may take; others are "other"
}

// New returns Metrics with every series registered, the Go runtime's and
// the process's collectors included. runtimes are the runtime names a
// label may carry (anything else, such as a hostile create's, is counted
// as "other", so a caller cannot grow the series); version is reported
// by corral_build_info.
func New(version string, runtimes []string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), runtimes: slices.Clone(runtimes)}
	m.creates = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "sandbox_creates_total",
		Help: "Sandbox creates asked of the manager, by runtime and source (cold, pool, snapshot), failed ones included."},
		[]string{"runtime", "source"})
	m.createFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "sandbox_create_failures_total",
		Help: "Sandbox creates that failed, by runtime and reason (the error's kind: invalid_argument, resource_exhausted, unavailable, internal, ...)."},
		[]string{"runtime", "reason"})
	m.tti = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "sandbox_time_to_interactive_seconds",
		Help:    "Time from a create's start to its sandbox running with its agent answering, by runtime and source.",
		Buckets: prometheus.ExponentialBucketsRange(0.005, 120, 16)}, []string{"runtime", "source"})
	m.execStart = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "exec_start_latency_seconds",
		Help:    "Time from an exec's request to its process started in the sandbox (what a caller waits for before its first output), by runtime.",
		Buckets: prometheus.ExponentialBucketsRange(0.0005, 30, 16)}, []string{"runtime"})
	m.egress = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "egress_decisions_total",
		Help: "Network decisions on sandboxes' egress, by decision (allowed, denied) and enforcement point (nftables, dns, proxy)."},
		[]string{"decision", "via"})
	m.reconnects = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "agent_reconnects_total",
		Help: "Agent connections that dropped while their sandbox ran and were made again."})
	m.store = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "store_latency_seconds",
		Help:    "Latency of the records store's (SQLite) operations, by operation.",
		Buckets: prometheus.ExponentialBucketsRange(0.00005, 5, 16)}, []string{"op"})
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help: "Always 1; the daemon's version as a label."}, []string{"version"})
	info.WithLabelValues(version).Set(1)
	m.reg.MustRegister(m.creates, m.createFailures, m.tti, m.execStart, m.egress, m.reconnects, m.store, info,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the registry, for tests that gather it directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// runtimeLabel bounds a runtime label to the known names.
func (m *Metrics) runtimeLabel(rt string) string {
	if slices.Contains(m.runtimes, rt) {
		return rt
	}
	return "other"
}

// Created reports one create of runtime rt from source, which took d and
// ended with a nil reason (running) or the failure's reason (an error
// kind's code).
func (m *Metrics) Created(rt, source string, d time.Duration, failed bool, reason string) {
	if m == nil {
		return
	}
	rt = m.runtimeLabel(rt)
	m.creates.WithLabelValues(rt, source).Inc()
	if failed {
		m.createFailures.WithLabelValues(rt, reason).Inc()
		return
	}
	m.tti.WithLabelValues(rt, source).Observe(d.Seconds())
}

// ExecStarted reports the time an exec in a sandbox of runtime rt took to
// start its process.
func (m *Metrics) ExecStarted(rt string, d time.Duration) {
	if m == nil {
		return
	}
	m.execStart.WithLabelValues(m.runtimeLabel(rt)).Observe(d.Seconds())
}

// Egress counts one egress decision made by via.
func (m *Metrics) Egress(allowed bool, via string) {
	if m == nil {
		return
	}
	decision := "denied"
	if allowed {
		decision = "allowed"
	}
	switch via {
	case "nftables", "dns", "proxy":
	default:
		via = "other"
	}
	m.egress.WithLabelValues(decision, via).Inc()
}

// AgentReconnected counts one agent connection made again.
func (m *Metrics) AgentReconnected() {
	if m == nil {
		return
	}
	m.reconnects.Inc()
}

// StoreOp reports one records operation op that took d. op is a
// constant of the store's, never a caller's string.
func (m *Metrics) StoreOp(op string, d time.Duration) {
	if m == nil {
		return
	}
	m.store.WithLabelValues(op).Observe(d.Seconds())
}
