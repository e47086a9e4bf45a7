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
