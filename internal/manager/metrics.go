package manager

import (
	"context"
	"math"
	goruntime "runtime"
	"strconv"
	"time"

	"corral/internal/metrics"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// newSampler returns the metrics sampler of the manager's sandboxes, or
// nil when Config.MetricsInterval turns sampling off.
func (m *Manager) newSampler() *metrics.Sampler {
	if m.cfg.MetricsInterval < 0 {
		return nil
	}
	return metrics.New(metrics.Config{Interval: m.cfg.MetricsInterval, Keep: m.cfg.MetricsKeep,
		Targets: m.metricTargets, Logger: m.log})
}

// metricTargets lists the sandboxes the sampler keeps histories for:
// running ones, measured by their runtime's Meter, and paused ones, kept
// without new samples. Warm pool sandboxes are nobody's yet.
func (m *Manager) metricTargets() []metrics.Target {
	m.mu.Lock()
	hs := make([]*handleRef, 0, len(m.handles))
	for _, h := range m.handles {
		hs = append(hs, &handleRef{h.Record(), h.Runtime(), h.Ref()})
	}
	m.mu.Unlock()
	var out []metrics.Target
	for _, h := range hs {
		if pooled(h.rec) {
			continue
		}
		switch h.rec.State {
		case sandbox.Paused:
			out = append(out, metrics.Target{ID: h.rec.ID})
		case sandbox.Running:
			if meter, ok := h.rt.(runtime.Meter); ok {
				out = append(out, metrics.Target{ID: h.rec.ID, Read: reader(meter, h.ref, h.rec)})
			}
		}
	}
	return out
}

// handleRef is what the sampler needs of a handle, copied under the lock.
type handleRef struct {
	rec *sandbox.Sandbox
	rt  runtime.Runtime
	ref runtime.Ref
}

// reader measures one sandbox through its runtime, with its limits.
func reader(meter runtime.Meter, ref runtime.Ref, rec *sandbox.Sandbox) func(context.Context) (metrics.Reading, error) {
	return func(ctx context.Context) (metrics.Reading, error) {
		u, err := meter.Usage(ctx, ref)
		if err != nil {
			return metrics.Reading{}, err
		}
		return metrics.Reading{CPUNanos: u.CPUNanos, CPUCount: cpuCount(rec), MemoryBytes: u.MemoryBytes,
			MemoryLimitBytes: uint64(rec.Spec.MemoryLimitMB) << 20, DiskBytes: u.DiskBytes,
			DiskLimitBytes: uint64(rec.Spec.DiskMB) << 20}, nil
	}
}

// cpuCount is how many cores a sandbox may use: a vm's vCPUs, else its CPU
// limit, else (a weight only) every core of the host.
func cpuCount(rec *sandbox.Sandbox) float64 {
	if v, err := strconv.Atoi(rec.RuntimeInfo["vcpus"]); err == nil && v > 0 {
		return float64(v)
	}
	if rec.Spec.CPULimit > 0 {
		return math.Round(rec.Spec.CPULimit*100) / 100
	}
	return float64(goruntime.NumCPU())
}

// Metrics returns sandbox id's samples taken after since (oldest first;
// all that are kept for a zero since): none for a sandbox that has ended
// (its history goes with it) or was started less than an interval ago.
// Unknown sandboxes are ErrNotFound.
func (m *Manager) Metrics(ctx context.Context, id string, since time.Time) ([]metrics.Sample, error) {
	if _, err := m.Get(ctx, id); err != nil {
		return nil, err
	}
	if m.sampler == nil {
		return nil, nil
	}
	return m.sampler.Since(id, since), nil
}

// MetricsInterval is the time between samples; 0 when sampling is off.
func (m *Manager) MetricsInterval() time.Duration {
	if m.sampler == nil {
		return 0
	}
	return m.sampler.Interval()
}
