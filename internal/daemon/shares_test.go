package daemon

import (
	"strings"
	"testing"
)

// Ceilings left to the host are sized from it, within bounds, with
// per-sandbox limits well under them; an operator's values are kept; a
// negative value is refused naming its flag.
func TestSharesSized(t *testing.T) {
	var s Shares
	if err := s.sized(); err != nil {
		t.Fatal(err)
	}
	if s.EgressConns < minCeiling || s.EgressConns > maxCeiling || s.EgressConnsPerSandbox > s.EgressConns/8 {
		t.Errorf("egress %d, %d per sandbox", s.EgressConns, s.EgressConnsPerSandbox)
	}
	if s.PortConns < minCeiling || s.PortConns > maxCeiling || s.PortConnsPerSandbox > s.PortConns/8 {
		t.Errorf("ports %d, %d per sandbox", s.PortConns, s.PortConnsPerSandbox)
	}
	s = Shares{EgressConns: 1000, EgressConnsPerSandbox: 300}
	if err := s.sized(); err != nil || s.EgressConns != 1000 || s.EgressConnsPerSandbox != 300 {
		t.Errorf("operator's values: %+v %v", s, err)
	}
	s = Shares{PortGuaranteedConns: -1}
	if err := s.sized(); err == nil || !strings.Contains(err.Error(), "--port-guaranteed-conns") {
		t.Errorf("negative value: %v", err)
	}
	c, err := Shares{}.capacity()
	if err != nil {
		t.Fatal(err)
	}
	if c.MemoryMB <= 0 || c.CPUMilli < 1000 || c.MemoryOvercommit != DefaultMemoryOvercommit || c.CPUOvercommit != DefaultCPUOvercommit {
		t.Errorf("capacity %+v", c)
	}
}

// Admission keeps the daemon's reserve out of what it gives away, before
// the overcommit factor: a default reserve of 512 MiB (a quarter of the
// host's share at most), the operator's when set, and one that leaves
// nothing refused.
func TestCapacityKeepsTheDaemonsMemory(t *testing.T) {
	const gib = int64(1) << 30
	tests := []struct {
		name     string
		s        Shares
		mem      int64
		memoryMB int64
		err      string
	}{
		{"default on 24 GiB", Shares{}, 24 * gib, 22*1024 - DefaultReserveMemoryMB, ""},
		{"operator's reserve", Shares{ReserveMemoryMB: 4096}, 24 * gib, 22*1024 - 4096, ""},
		{"default on a small host", Shares{}, 2 * gib, 1024 - 256, ""},
		{"a reserve that leaves nothing", Shares{ReserveMemoryMB: 22 * 1024}, 24 * gib, 0, "--reserve-memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.s.capacityOf(tt.mem, 4)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("capacity %+v, err %v; want an error naming %s", c, err, tt.err)
				}
				return
			}
			if err != nil || c.MemoryMB != tt.memoryMB || c.CPUMilli != 4000 {
				t.Fatalf("capacity %+v %v; want %d MiB for sandboxes", c, err, tt.memoryMB)
			}
			// What admission may hand out: the overcommit factor times what
			// is left after the reserve.
			if want := tt.memoryMB * DefaultMemoryOvercommit; int64(float64(c.MemoryMB)*c.MemoryOvercommit) != want {
				t.Errorf("admittable %v, want %d", float64(c.MemoryMB)*c.MemoryOvercommit, want)
			}
		})
	}
	if err := (Shares{ReserveMemoryMB: -1}).check(); err == nil || !strings.Contains(err.Error(), "--reserve-memory") {
		t.Errorf("negative reserve: %v", err)
	}
}
