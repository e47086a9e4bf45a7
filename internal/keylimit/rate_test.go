package keylimit

import (
	"fmt"
	"testing"
	"time"
)

func TestRate(t *testing.T) {
	r := &Rate{Burst: 10, PerSecond: 2}
	t0 := time.Unix(1_800_000_000, 0)
	n := 0
	for i := 0; i < 100; i++ {
		if r.Allow("a", t0) {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("%d of a burst of 10", n)
	}
	if !r.Allow("b", t0) {
		t.Fatal("another key shares the bucket")
	}
	n = 0
	for i := 0; i < 100; i++ {
		if r.Allow("a", t0.Add(3*time.Second)) {
			n++
		}
	}
	if n != 6 {
		t.Fatalf("%d after 3 s at 2 a second", n)
	}
	for i := 0; i < maxRateKeys+10; i++ {
		r.Allow(fmt.Sprint("k", i), t0.Add(time.Hour))
	}
	if len(r.buckets) > maxRateKeys {
		t.Errorf("%d keys remembered", len(r.buckets))
	}
}
