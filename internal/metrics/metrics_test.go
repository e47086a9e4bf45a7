package metrics

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// CPU is a rate between readings: the first reading is a baseline, a
// counter that goes backwards starts a new one.
func TestSamplesFromReadings(t *testing.T) {
	s := New(Config{Keep: 3, Targets: func() []Target { return nil }})
	t0 := time.Unix(1000, 0)
	s.add("a", t0, Reading{CPUNanos: 5e9, MemoryBytes: 1})
	if got := s.Since("a", time.Time{}); len(got) != 0 {
		t.Fatalf("a baseline made samples: %+v", got)
	}
	// 1.5 s of CPU in 1 s: 150 % of one core.
	s.add("a", t0.Add(time.Second), Reading{CPUNanos: 6.5e9, CPUCount: 2, MemoryBytes: 10, MemoryLimitBytes: 100, DiskBytes: 20, DiskLimitBytes: 200})
	got := s.Since("a", time.Time{})
	if len(got) != 1 || math.Abs(got[0].CPUPercent-150) > 1e-9 || got[0].CPUCount != 2 || got[0].MemoryUsed != 10 ||
		got[0].MemoryTotal != 100 || got[0].DiskUsed != 20 || got[0].DiskTotal != 200 || !got[0].Time.Equal(t0.Add(time.Second)) {
		t.Fatalf("first sample: %+v", got)
	}
	s.add("a", t0.Add(2*time.Second), Reading{CPUNanos: 1e9}) // reset: a new baseline
	s.add("a", t0.Add(4*time.Second), Reading{CPUNanos: 2e9}) // 1 s in 2 s
	if l, ok := s.Latest("a"); !ok || math.Abs(l.CPUPercent-50) > 1e-9 {
		t.Fatalf("after a reset: %+v %v", l, ok)
	}
	for i := 5; i < 10; i++ {
		s.add("a", t0.Add(time.Duration(i)*time.Second), Reading{CPUNanos: uint64(i) * 1e9})
	}
	got = s.Since("a", time.Time{})
	if len(got) != 3 || !got[0].Time.Equal(t0.Add(7*time.Second)) || !got[2].Time.Equal(t0.Add(9*time.Second)) {
		t.Fatalf("the ring keeps the newest three, oldest first: %+v", got)
	}
	if got := s.Since("a", t0.Add(8*time.Second)); len(got) != 1 || !got[0].Time.Equal(t0.Add(9*time.Second)) {
		t.Fatalf("since: %+v", got)
	}
	if _, ok := s.Latest("nobody"); ok || s.Since("nobody", time.Time{}) != nil {
		t.Error("a sandbox without a history has samples")
	}
}

// A round reads the targets it is given: a failed reading is skipped, a
// target without Read keeps its history, one no longer listed loses it.
func TestRounds(t *testing.T) {
	var cpu uint64
	read := func(context.Context) (Reading, error) { cpu += 1e8; return Reading{CPUNanos: cpu, MemoryBytes: 7}, nil }
	failing := func(context.Context) (Reading, error) { return Reading{}, errors.New("gone") }
	targets := []Target{{ID: "run", Read: read}, {ID: "bad", Read: failing}}
	s := New(Config{Interval: time.Hour, Targets: func() []Target { return targets }})
	ctx := context.Background()
	s.Round(ctx)
	time.Sleep(10 * time.Millisecond) // a CPU rate needs time between the two readings
	s.Round(ctx)
	if l, ok := s.Latest("run"); !ok || l.MemoryUsed != 7 || l.CPUPercent <= 0 {
		t.Fatalf("after two rounds: %+v %v", l, ok)
	}
	if _, ok := s.Latest("bad"); ok {
		t.Error("a failing target has samples")
	}
	targets = []Target{{ID: "run"}} // paused: kept, not read
	s.Round(ctx)
	if n := len(s.Since("run", time.Time{})); n != 1 {
		t.Fatalf("a paused sandbox's history: %d samples", n)
	}
	targets = nil
	s.Round(ctx)
	if _, ok := s.Latest("run"); ok {
		t.Error("an ended sandbox's history was kept")
	}
	if s.Interval() != time.Hour {
		t.Errorf("interval %s", s.Interval())
	}
}
