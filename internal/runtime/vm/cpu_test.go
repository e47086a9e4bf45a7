package vm

import (
	"os"
	"testing"
	"time"
)

// processCPU reads a process's CPU time: this one's grows by about what
// a busy loop burns, and a pid with no process is an error.
func TestProcessCPU(t *testing.T) {
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 100*time.Millisecond || d > 5*time.Second {
		t.Errorf("300 ms of busy loop read as %s of CPU time", d)
	}
	if _, err := processCPU(1 << 30); err == nil {
		t.Errorf("no error for a pid with no process")
	}
}
