// Package testwait is how tests wait for something to happen: on the
// condition itself, asked first after 10 ms and then at doubling intervals
// up to 250 ms, so what happens at once is seen at once and what takes a
// while costs little, within a deadline. A plain time.Sleep is left only
// where time itself is what a test measures or must let pass.
package testwait

import (
	"testing"
	"time"
)

// Poll reports whether cond held within limit.
func Poll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for delay := 10 * time.Millisecond; !cond(); delay = min(2*delay, 250*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(delay)
	}
	return true
}

// For fails t unless cond holds within limit; what names the condition in
// the failure.
func For(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(limit, cond) {
		t.Fatalf("timed out after %s waiting for %s", limit, what)
	}
}
