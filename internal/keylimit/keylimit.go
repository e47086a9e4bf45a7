// Package keylimit bounds how many holders each key (a sandbox, a source
// address) may have at once: a plain per-key bound (Limiter), fair shares
// of a ceiling all keys share (Shares), a lock per key (Mutex), and a
// per-key rate of reports (Every). It imports nothing from Corral.
package keylimit

import "sync"

// Limiter admits at most Max concurrent holders per key. The zero value
// admits none; set Max.
type Limiter struct {
	Max int

	mu sync.Mutex
	n  map[string]int
}

// Acquire takes a slot for key, or reports false when key is at Max.
func (l *Limiter) Acquire(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	if l.n[key] >= l.Max {
		return false
	}
	l.n[key]++
	return true
}

// Release returns a slot taken by Acquire.
func (l *Limiter) Release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] <= 1 {
		delete(l.n, key)
		return
	}
	l.n[key]--
}
