package manager

import (
	"context"
	"slices"
	"time"

	"corral/internal/errdefs"
	"corral/internal/manager/handle"
	"corral/internal/sandbox"
	"corral/internal/telemetry"
)

// createStat is what a create tells the telemetry: its runtime (as asked,
// then as normalized) and its source (cold unless a pool or a snapshot
// served it).
type createStat struct {
	runtime, source string
	pooled          *sandbox.Sandbox // the record, when a warm pool served the create
}

// Create validates spec, starts a sandbox and returns its record once the
// agent answers (state running). On any failure everything created is
// undone and the record ends as failed.
func (m *Manager) Create(ctx context.Context, spec sandbox.Spec) (*sandbox.Sandbox, error) {
	t0 := time.Now()
	st := createStat{source: telemetry.SourceCold}
	rec, err := m.create(ctx, spec, &st)
	if m.cfg.Telemetry != nil {
		m.cfg.Telemetry.Created(st.runtime, st.source, time.Since(t0), err != nil, errdefs.Code(err))
	}
	return rec, err
}

// execTimer returns what a process calls at its start event: the time
// from the exec's call (t0) to the process running, by h's runtime.
func (m *Manager) execTimer(h *handle.Handle, t0 time.Time) func() {
	if m.cfg.Telemetry == nil {
		return nil
	}
	return func() { m.cfg.Telemetry.ExecStarted(h.Runtime().Name(), time.Since(t0)) }
}

// liveStates are the states a live sandbox can be in; each is reported
// for every runtime, zero included, so a dashboard's series exist from
// the start.
var liveStates = []sandbox.State{sandbox.Creating, sandbox.Running, sandbox.Paused, sandbox.Terminating}

// TelemetryState is what the Prometheus gauges read at a scrape: the live
// sandboxes by state and runtime (those waiting in a warm pool left out:
// the pools report them), and the warm pools.
func (m *Manager) TelemetryState() telemetry.State {
	counts := map[[2]string]int{}
	m.mu.Lock()
	hs := make([]*handle.Handle, 0, len(m.handles))
	for _, h := range m.handles {
		hs = append(hs, h)
	}
	m.mu.Unlock()
	for _, h := range hs {
		rec := h.Record()
		if rec.Spec.Tags[poolTag] != "" || !slices.Contains(liveStates, rec.State) {
			continue
		}
		counts[[2]string{string(rec.State), h.Runtime().Name()}]++
	}
	var st telemetry.State
	for _, rt := range sandbox.Runtimes {
		for _, s := range liveStates {
			st.Sandboxes = append(st.Sandboxes, telemetry.SandboxCount{State: string(s), Runtime: rt, N: counts[[2]string{string(s), rt}]})
		}
	}
	for _, p := range m.WarmPools() {
		st.Pools = append(st.Pools, telemetry.Pool{Runtime: p.Spec.Runtime, Image: p.Spec.Image, Size: p.Size, Ready: p.Ready, Hits: p.Hits, Misses: p.Misses})
	}
	return st
}
