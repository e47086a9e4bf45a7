// Package metrics samples what each live sandbox uses — CPU, memory and
// disk — every few seconds, and keeps a bounded history of samples per
// sandbox. It knows a sandbox only as an id and a function that measures
// it (a Target); the manager supplies those from its live sandboxes and
// their runtimes' runtime.Meter. Readers (the API's metrics endpoint, a
// later meter of usage or a Prometheus exporter) take copies of the
// samples with Since or Latest.
//
// CPU is a rate: a sample's CPUPercent is the CPU time a sandbox used
// between two readings over the wall time between them, so a sandbox's
// first reading is a baseline, and its first sample comes one interval
// later. A counter that goes backwards (a runtime that restarted the
// sandbox's cgroup: a gVisor resume) starts a new baseline.
//
// It imports nothing from Corral.
package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults of a Config.
const (
	DefaultInterval = 5 * time.Second
	DefaultKeep     = 120 // ten minutes at the default interval
	// readTimeout bounds one Target's reading.
	readTimeout = 2 * time.Second
)

// Reading is what measuring a sandbox once gives: counters and levels as
// the host sees them.
type Reading struct {
	// CPUNanos is the CPU time the sandbox used so far (cumulative).
	CPUNanos uint64
	// CPUCount is how many cores the sandbox may use.
	CPUCount float64
	// MemoryBytes is the memory it uses now; MemoryLimitBytes its limit.
	MemoryBytes, MemoryLimitBytes uint64
	// DiskBytes is what its private writable layer takes on the host's
	// disk now; DiskLimitBytes the layer's size.
	DiskBytes, DiskLimitBytes uint64
}

// Sample is one point of a sandbox's history.
type Sample struct {
	Time time.Time
	// CPUPercent is the CPU the sandbox used since the previous reading,
	// in percent of one core (200: two cores busy).
	CPUPercent float64
	CPUCount   float64
	// MemoryUsed and MemoryTotal, DiskUsed and DiskTotal are bytes.
	MemoryUsed, MemoryTotal uint64
	DiskUsed, DiskTotal     uint64
}

// Target is a sandbox to keep a history for.
type Target struct {
	ID string
	// Read measures the sandbox now; nil keeps its history without a new
	// sample (a paused sandbox).
	Read func(context.Context) (Reading, error)
}

// Config configures a Sampler.
type Config struct {
	// Interval is the time between rounds; default DefaultInterval.
	Interval time.Duration
	// Keep bounds the samples kept per sandbox (the oldest go); default
	// DefaultKeep.
	Keep int
	// Targets lists the sandboxes to keep histories for, each round; the
	// histories of sandboxes no longer listed are dropped.
	Targets func() []Target
	Logger  *slog.Logger
}

// Sampler keeps the sandboxes' histories. Its methods are safe for
// concurrent use.
type Sampler struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	boxes map[string]*history
}

// history is one sandbox's: a ring of samples and the last reading.
type history struct {
	ring     []Sample // oldest first once full: ring[next:] then ring[:next]
	next     int
	full     bool
	last     Reading
	lastTime time.Time
}

// New returns a Sampler; Run drives it.
func New(cfg Config) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sampler{cfg: cfg, log: cfg.Logger, boxes: map[string]*history{}}
}

// Interval is the time between rounds.
func (s *Sampler) Interval() time.Duration { return s.cfg.Interval }

// Run samples every Interval until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	s.Round(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Round(ctx)
		}
	}
}

// Round reads every target once, now.
func (s *Sampler) Round(ctx context.Context) {
	targets := s.cfg.Targets()
	keep := make(map[string]bool, len(targets))
	for _, tg := range targets {
		keep[tg.ID] = true
		if tg.Read == nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		r, err := tg.Read(rctx)
		cancel()
		if err != nil {
			s.log.Debug("measuring a sandbox failed", "sandbox", tg.ID, "err", err)
			continue
		}
		s.add(tg.ID, time.Now(), r)
	}
	s.mu.Lock()
	for id := range s.boxes {
		if !keep[id] {
			delete(s.boxes, id)
		}
	}
	s.mu.Unlock()
}

// add records reading r of sandbox id taken at now: a sample, unless it
// is the first reading (or a counter went backwards), which is a baseline.
func (s *Sampler) add(id string, now time.Time, r Reading) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.boxes[id]
	if h == nil {
		h = &history{ring: make([]Sample, 0, s.cfg.Keep)}
		s.boxes[id] = h
	}
	prev, prevTime := h.last, h.lastTime
	h.last, h.lastTime = r, now
	if prevTime.IsZero() || r.CPUNanos < prev.CPUNanos || !now.After(prevTime) {
		return
	}
	cpu := float64(r.CPUNanos-prev.CPUNanos) / float64(now.Sub(prevTime).Nanoseconds()) * 100
	h.push(Sample{Time: now, CPUPercent: cpu, CPUCount: r.CPUCount, MemoryUsed: r.MemoryBytes, MemoryTotal: r.MemoryLimitBytes,
		DiskUsed: r.DiskBytes, DiskTotal: r.DiskLimitBytes})
}

// push appends a sample, dropping the oldest when the ring is full.
func (h *history) push(smp Sample) {
	if !h.full && len(h.ring) < cap(h.ring) {
		h.ring = append(h.ring, smp)
		h.full = len(h.ring) == cap(h.ring)
		return
	}
	h.ring[h.next] = smp
	h.next = (h.next + 1) % len(h.ring)
}

// ordered returns the samples oldest first.
func (h *history) ordered() []Sample {
	out := make([]Sample, 0, len(h.ring))
	out = append(out, h.ring[h.next:]...)
	return append(out, h.ring[:h.next]...)
}

// Since returns sandbox id's samples taken after t, oldest first (all of
// them for a zero t); none for a sandbox without a history.
func (s *Sampler) Since(id string, t time.Time) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.boxes[id]
	if h == nil {
		return nil
	}
	var out []Sample
	for _, smp := range h.ordered() {
		if smp.Time.After(t) {
			out = append(out, smp)
		}
	}
	return out
}

// Latest returns sandbox id's newest sample.
func (s *Sampler) Latest(id string) (Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.boxes[id]
	if h == nil || len(h.ring) == 0 {
		return Sample{}, false
	}
	return h.ring[(h.next+len(h.ring)-1)%len(h.ring)], true
}
