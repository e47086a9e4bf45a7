package selftest

import (
	"math"
	"testing"
)

func TestNeighbourBound(t *testing.T) {
	for _, c := range []struct{ cores, limit, want float64 }{
		{2, 1, 2.2},   // one core left to everything else
		{4, 1, 1.5},   // 1.47 from the cores: the floor
		{16, 1, 1.5},  // plenty left
		{8, 4, 2.2},   // half the host
		{2, 2, 4.4},   // an attacker that may take the whole host: half a core assumed left
		{1, 0.5, 2.2}, // half of one core
	} {
		if got := neighbourBound(c.cores, c.limit); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("neighbourBound(%v, %v) = %v, want %v", c.cores, c.limit, got, c.want)
		}
	}
}
