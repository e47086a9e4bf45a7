package oomscore

import (
	"os"
	"os/exec"
	"testing"
)

// A child's score is raised and read back; an ended process is no error;
// Above is above this process's own score.
func TestSetGetAbove(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to start: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	self, err := Get(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := min(Max, self+300)
	if err := Set(cmd.Process.Pid, want); err != nil {
		t.Fatal(err)
	}
	if got, err := Get(cmd.Process.Pid); err != nil || got != want {
		t.Errorf("child's score %d %v, want %d", got, err, want)
	}
	if a := Above(); a <= self && self < Max || a < 0 {
		t.Errorf("Above() = %d with this process at %d", a, self)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := Set(cmd.Process.Pid, 500); err != nil {
		t.Errorf("an ended process: %v", err)
	}
}
