package keylimit

import (
	"sync"
	"time"
)

// Rate is a token bucket per key: Burst at once, then PerSecond a second.
// The zero value is unusable; set both. Once maxRateKeys are remembered,
// keys whose bucket has refilled are forgotten, and if none has, one key
// (whichever the map gives: it starts again from a full bucket, a
// leniency the bound on memory is worth).
type Rate struct {
	Burst     int
	PerSecond float64

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxRateKeys bounds the keys remembered before full ones are forgotten.
const maxRateKeys = 4096

// Allow takes a token of key's bucket at now, and reports whether there
// was one.
func (r *Rate) Allow(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buckets == nil {
		r.buckets = map[string]*bucket{}
	}
	b := r.buckets[key]
	if b == nil {
		if len(r.buckets) >= maxRateKeys {
			r.forgetFull(now)
		}
		b = &bucket{tokens: float64(r.Burst), last: now}
		r.buckets[key] = b
	}
	b.tokens = min(float64(r.Burst), b.tokens+now.Sub(b.last).Seconds()*r.PerSecond)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (r *Rate) forgetFull(now time.Time) {
	for k, b := range r.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*r.PerSecond >= float64(r.Burst) {
			delete(r.buckets, k)
		}
	}
	for k := range r.buckets {
		if len(r.buckets) < maxRateKeys {
			return
		}
		delete(r.buckets, k)
	}
}
