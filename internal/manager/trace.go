package manager

import (
	"sync"
	"time"

	"corral/internal/sandbox"
)

// trace times the steps of one create: each step is the time since the
// one before it, so the steps add up to the whole; a runtime's own steps
// (sub) are recorded beside them without moving the clock.
type trace struct {
	mu     sync.Mutex
	last   time.Time
	phases []sandbox.Phase
}

func newTrace(t0 time.Time) *trace { return &trace{last: t0} }

// step records the time since the previous step as name.
func (t *trace) step(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.phases = append(t.phases, sandbox.Phase{Name: name, Duration: now.Sub(t.last)})
	t.last = now
}

// sub returns a recorder for steps inside the current one, named with
// prefix.
func (t *trace) sub(prefix string) func(string, time.Duration) {
	return func(name string, took time.Duration) {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.phases = append(t.phases, sandbox.Phase{Name: prefix + name, Duration: took})
	}
}

// done records a last step and returns the phases.
func (t *trace) done(name string) []sandbox.Phase {
	t.step(name)
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]sandbox.Phase(nil), t.phases...)
}
