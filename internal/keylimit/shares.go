package keylimit

import (
	"fmt"
	"sync"
	"time"
)

// Shares bounds holders per key under a ceiling that all keys share, so
// that some keys cannot starve the rest:
//
//   - no key holds more than PerKey slots;
//   - no more than Total slots are held in all;
//   - a key's first Guaranteed slots are its guaranteed share: it gets one
//     whenever fewer than Total are held;
//   - a slot beyond a key's share (a burst) is given only while fewer than
//     Total-Reserve are held, so bursts never take the last Reserve slots,
//     which only keys still under their share can use.
//
// Bursts therefore never hold more than Total-Reserve slots at once, and a
// key under its share is refused only when at least Reserve slots are held
// by keys within their own shares: by Reserve/Guaranteed keys or more. The
// zero value admits none; fill the fields (Check validates them).
type Shares struct {
	Total      int // the ceiling, all keys together
	PerKey     int // the most one key may hold
	Guaranteed int // each key's share, given whatever others burst
	Reserve    int // the part of Total bursts may not use

	mu    sync.Mutex
	n     map[string]int
	total int
}

// Refusal says which bound refused a slot.
type Refusal int

const (
	// Granted: no bound refused.
	Granted Refusal = iota
	// RefusedPerKey: the key holds PerKey slots.
	RefusedPerKey
	// RefusedShared: the ceiling (or, for a burst, the part of it bursts
	// may use) is full.
	RefusedShared
)

// String names the bound as events show it.
func (r Refusal) String() string {
	switch r {
	case RefusedPerKey:
		return "per_sandbox"
	case RefusedShared:
		return "shared"
	}
	return "granted"
}

// Check reports whether the bounds are consistent: 0 < Guaranteed <=
// PerKey <= Total, and 0 <= Reserve < Total.
func (s *Shares) Check() error {
	switch {
	case s.Total <= 0:
		return fmt.Errorf("the ceiling must be positive, got %d", s.Total)
	case s.PerKey <= 0 || s.PerKey > s.Total:
		return fmt.Errorf("the per-sandbox limit must be between 1 and the ceiling %d, got %d", s.Total, s.PerKey)
	case s.Guaranteed <= 0 || s.Guaranteed > s.PerKey:
		return fmt.Errorf("the guaranteed share must be between 1 and the per-sandbox limit %d, got %d", s.PerKey, s.Guaranteed)
	case s.Reserve < 0 || s.Reserve >= s.Total:
		return fmt.Errorf("the reserve must be between 0 and the ceiling %d, got %d", s.Total, s.Reserve)
	}
	return nil
}

// Acquire takes a slot for key, or says which bound refused it.
func (s *Shares) Acquire(key string) Refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	h := s.n[key]
	switch {
	case h >= s.PerKey:
		return RefusedPerKey
	case s.total >= s.Total:
		return RefusedShared
	case h >= s.Guaranteed && s.total >= s.Total-s.Reserve:
		return RefusedShared
	}
	s.n[key]++
	s.total++
	return Granted
}

// Release returns a slot taken by Acquire.
func (s *Shares) Release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.n[key]
	if !ok {
		return
	}
	s.total--
	if h <= 1 {
		delete(s.n, key)
		return
	}
	s.n[key] = h - 1
}

// Held reports the slots key holds and the slots held in all.
func (s *Shares) Held(key string) (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[key], s.total
}

// Every lets through at most one report per key and interval, and counts
// the ones it held back, so that a key refused a thousand times a second
// is told once a second how many times it was. The zero value is unusable;
// set Interval.
type Every struct {
	Interval time.Duration

	mu   sync.Mutex
	last map[string]*every
}

type every struct {
	at      time.Time
	pending int // reports held back since at
}

// maxEveryKeys bounds the keys remembered; past it, keys quiet for an
// interval are forgotten.
const maxEveryKeys = 4096

// Allow records a report for key at now. It returns true, with how many
// reports this one stands for (itself and those held back since the last
// one let through), when the report should be made.
func (e *Every) Allow(key string, now time.Time) (bool, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last == nil {
		e.last = map[string]*every{}
	}
	l := e.last[key]
	if l == nil {
		if len(e.last) >= maxEveryKeys {
			e.forgetQuiet(now)
		}
		e.last[key] = &every{at: now}
		return true, 1
	}
	if now.Sub(l.at) < e.Interval {
		l.pending++
		return false, 0
	}
	n := l.pending + 1
	l.at, l.pending = now, 0
	return true, n
}

func (e *Every) forgetQuiet(now time.Time) {
	for k, l := range e.last {
		if now.Sub(l.at) >= e.Interval {
			delete(e.last, k)
		}
	}
}
