package keylimit

import (
	"fmt"
	"testing"
	"time"
)

// Hostile keys that each take all they can leave every other key its
// guaranteed share, and never more than PerKey each.
func TestSharesHostileKeys(t *testing.T) {
	s := &Shares{Total: 100, PerKey: 30, Guaranteed: 5, Reserve: 50}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	refused := map[Refusal]int{}
	for i := range 8 {
		key := fmt.Sprint("hostile", i)
		for {
			r := s.Acquire(key)
			if r != Granted {
				refused[r]++
				break
			}
		}
		if h, _ := s.Held(key); h > s.PerKey {
			t.Fatalf("%s holds %d, over PerKey", key, h)
		}
	}
	if refused[RefusedPerKey] == 0 || refused[RefusedShared] == 0 {
		t.Errorf("refusals %v: want both bounds to have refused", refused)
	}
	_, total := s.Held("")
	if total > s.Total-s.Reserve+8*s.Guaranteed {
		t.Errorf("%d held: bursts used the reserve", total)
	}
	for i := range s.Guaranteed {
		if r := s.Acquire("victim"); r != Granted {
			t.Fatalf("victim's slot %d refused (%s) with %d held", i+1, r, total)
		}
	}
	if r := s.Acquire("victim"); r != RefusedShared {
		t.Errorf("victim's burst beyond its share: %s, want shared", r)
	}
}

// The ceiling holds against guaranteed shares too, and released slots are
// reusable; released keys take no memory.
func TestSharesCeiling(t *testing.T) {
	s := &Shares{Total: 4, PerKey: 2, Guaranteed: 2, Reserve: 0}
	for i := range 4 {
		if r := s.Acquire(fmt.Sprint(i / 2)); r != Granted {
			t.Fatalf("slot %d: %s", i, r)
		}
	}
	if r := s.Acquire("x"); r != RefusedShared {
		t.Fatalf("over the ceiling: %s", r)
	}
	s.Release("0")
	if r := s.Acquire("x"); r != Granted {
		t.Fatalf("after a release: %s", r)
	}
	for _, k := range []string{"0", "1", "1", "x", "unknown"} {
		s.Release(k)
	}
	if len(s.n) != 0 || s.total != 0 {
		t.Errorf("left after releasing all: %v, total %d", s.n, s.total)
	}
}

func TestSharesCheck(t *testing.T) {
	for _, b := range [][4]int{{0, 1, 1, 0}, {10, 11, 1, 0}, {10, 5, 6, 0}, {10, 5, 0, 0}, {10, 5, 1, 10}} {
		s := &Shares{Total: b[0], PerKey: b[1], Guaranteed: b[2], Reserve: b[3]}
		if err := s.Check(); err == nil {
			t.Errorf("total, per key, guaranteed, reserve %v accepted", b)
		}
	}
}

// Every lets one report a key through per interval and counts the rest
// into the next.
func TestEvery(t *testing.T) {
	e := &Every{Interval: time.Second}
	t0 := time.Unix(1000, 0)
	if ok, n := e.Allow("a", t0); !ok || n != 1 {
		t.Fatalf("first report: %v %d", ok, n)
	}
	for i := range 5 {
		if ok, _ := e.Allow("a", t0.Add(time.Duration(i)*100*time.Millisecond)); ok {
			t.Fatalf("report %d within the interval let through", i)
		}
	}
	if ok, n := e.Allow("b", t0); !ok || n != 1 {
		t.Fatalf("another key held back: %v %d", ok, n)
	}
	if ok, n := e.Allow("a", t0.Add(time.Second)); !ok || n != 6 {
		t.Fatalf("after the interval: %v %d, want true 6", ok, n)
	}
}
