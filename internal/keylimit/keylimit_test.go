package keylimit

import "testing"

func TestLimiter(t *testing.T) {
	l := &Limiter{Max: 2}
	if !l.Acquire("a") || !l.Acquire("a") {
		t.Fatal("two slots of a refused")
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
