package cgroups

import (
	"os/exec"
	"testing"
	"time"
)

// ReadOOM sees a group's limit, then the OOM kill of a process that
// allocated past it (tail holds all its input in memory).
func TestReadOOM(t *testing.T) {
	requireRoot(t)
	_, g := testGroup(t)
	if err := Create(g); err != nil {
		t.Fatal(err)
	}
	const limit = 32 << 20
	if err := SetLimits(g, Limits{MemoryBytes: limit}); err != nil {
		t.Fatal(err)
	}
	o, err := ReadOOM(g)
	if err != nil || o.Kills != 0 || o.LimitBytes != limit {
		t.Fatalf("fresh group: %+v, %v; want no kills and the limit %d", o, err, limit)
	}
	cmd := exec.Command("sh", "-c", "sleep 0.3; head -c 200000000 /dev/zero | tail -c 150000000 >/dev/null")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := AddProcess(g, cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the allocation was not stopped")
	}
	if o, err = ReadOOM(g); err != nil || o.Kills == 0 {
		t.Errorf("after an allocation past the limit: %+v, %v; want an OOM kill", o, err)
	}
	if _, err := ReadOOM("/corral-test-no-such-group"); err == nil {
		t.Error("ReadOOM of a missing group succeeded")
	}
}
