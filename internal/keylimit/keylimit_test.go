package keylimit

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := &Limiter{Max: 2}
	for i := range 2 {
		if !l.Acquire("a") {
			t.Fatalf("slot %d of a refused", i+1)
		}
	}
	if l.Acquire("a") {
		t.Fatal("a third slot of a admitted")
	}
	if !l.Acquire("b") {
		t.Fatal("b is limited by a")
	}
	l.Release("a")
	if !l.Acquire("a") {
		t.Fatal("a released slot not reusable")
	}
	l.Release("a")
	l.Release("a")
	l.Release("b")
	if len(l.n) != 0 {
		t.Errorf("released keys kept: %v", l.n)
	}
}

func TestMutex(t *testing.T) {
	var m Mutex
	unlockA := m.Lock("a")
	unlockB := m.Lock("b") // another key is not held up
	got, done := make(chan struct{}), make(chan struct{})
	go func() {
		unlock := m.Lock("a")
		close(got)
		unlock()
		close(done)
	}()
	select {
	case <-got:
		t.Fatal("a second holder of a got in")
	case <-time.After(20 * time.Millisecond):
	}
	unlockA()
	<-got
	<-done
	unlockB()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.locks) != 0 {
		t.Errorf("released keys kept: %v", m.locks)
	}
}
