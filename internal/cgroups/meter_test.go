package cgroups

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"corral/internal/testwait"
)

// A group's meter counts the CPU its processes burn and the memory they
// hold; a group that does not exist is ErrNotExist.
func TestReadMeter(t *testing.T) {
	requireRoot(t)
	_, group := testGroup(t)
	if err := Create(group); err != nil {
		t.Fatal(err)
	}
	// Busy until killed: a loop bounded by wall time can burn less than
	// the 200 ms waited for on a loaded host (it did in a CI run).
	cmd := exec.Command("sh", "-c", "x=$(head -c 8000000 /dev/zero | tr '\\0' a); while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := AddProcess(group, cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	before, err := ReadMeter(group)
	if err != nil {
		t.Fatal(err)
	}
	var after Meter
	testwait.For(t, time.Minute, "200 ms of the busy loop's CPU to be counted", func() bool {
		if after, err = ReadMeter(group); err != nil {
			t.Fatal(err)
		}
		return after.CPUNanos >= before.CPUNanos+200e6
	})
	if after.WorkingSetBytes == 0 {
		t.Errorf("working set %+v", after)
	}
	if _, err := ReadMeter(group + "/missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing group: %v", err)
	}
}
