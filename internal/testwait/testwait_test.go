package testwait

import (
	"testing"
	"time"
)

// Poll sees a condition that holds at once without waiting, one that
// comes true later when it does, and gives up on one that never does
// once the limit passed.
func TestPoll(t *testing.T) {
	start := time.Now()
	if !Poll(time.Second, func() bool { return true }) || time.Since(start) > 50*time.Millisecond {
		t.Errorf("a condition true at once took %s", time.Since(start))
	}
	ready := time.Now().Add(100 * time.Millisecond)
	if !Poll(5*time.Second, func() bool { return time.Now().After(ready) }) {
		t.Errorf("a condition true after 100 ms was not seen")
	}
	start = time.Now()
	if Poll(200*time.Millisecond, func() bool { return false }) {
		t.Errorf("a condition never true was reported as held")
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("gave up after %s, before the limit", took)
	}
}
