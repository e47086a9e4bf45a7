package runtimetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"corral/internal/cgroups"
)

// A dead run's cgroup and directory are swept, with the process left in
// the cgroup; a live run's (this one's) are kept.
func TestSweepDead(t *testing.T) {
	prefix := fmt.Sprintf("corral-sweeptest-%d", os.Getpid())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid, livePid := dead.Process.Pid, os.Getpid()
	deadDir := filepath.Join(os.TempDir(), fmt.Sprintf("%s-%d-x", prefix, deadPid))
	liveDir := filepath.Join(os.TempDir(), fmt.Sprintf("%s-%d-x", prefix, livePid))
	otherDir := filepath.Join(os.TempDir(), prefix+"-notapid")
	for _, d := range []string{deadDir, liveDir, otherDir} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	deadGroup := fmt.Sprintf("/%s-%d", prefix, deadPid)
	var orphan *exec.Cmd
	if os.Geteuid() == 0 {
		if err := cgroups.Create(deadGroup); err != nil {
			t.Fatal(err)
		}
		orphan = exec.Command("sleep", "600")
		if err := orphan.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { orphan.Process.Kill(); orphan.Wait() })
		if err := cgroups.AddProcess(deadGroup, orphan.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 { // a mount under the dead run's directory is unmounted first
		mnt := filepath.Join(deadDir, "sub")
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	}
	if err := SweepDead(prefix); err != nil {
		t.Fatal(err)
	}
	if exists(deadDir) {
		t.Errorf("the dead run's directory is still there")
	}
	if !exists(liveDir) || !exists(otherDir) {
		t.Errorf("a live run's or a foreign directory was swept")
	}
	if orphan == nil {
		t.Log("cgroups not checked: needs root")
		return
	}
	if ok, err := cgroups.Exists(deadGroup); err != nil || ok {
		t.Errorf("the dead run's cgroup %s still exists (%v)", deadGroup, err)
	}
	if err := orphan.Wait(); err == nil {
		t.Errorf("the process in the dead run's cgroup was not killed")
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
