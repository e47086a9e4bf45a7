package scalebench

import (
	"slices"
	"sync"
	"time"
)

// samples collects durations from many goroutines.
type samples struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

// Dist is a distribution of durations.
type Dist struct {
	N             int
	P50, P99, Max time.Duration
	Sum           time.Duration
}

func (s *samples) dist() Dist {
	s.mu.Lock()
	d := slices.Clone(s.d)
	s.mu.Unlock()
	if len(d) == 0 {
		return Dist{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return Dist{N: len(d), P50: at(0.50), P99: at(0.99), Max: d[len(d)-1], Sum: sum}
}
