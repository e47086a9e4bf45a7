package cgroups

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	if _, err := os.Stat(Root); err != nil {
		t.Skipf("no cgroup filesystem at %s: %v", Root, err)
	}
}

// testGroup returns a unique group name under a per-test parent and removes
// the parent when the test ends.
func testGroup(t *testing.T) (parent, group string) {
	t.Helper()
	parent = fmt.Sprintf("/corral-test-%d-%s", os.Getpid(), t.Name())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := Remove(ctx, parent); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return parent, parent + "/sb-1"
}

func TestDetect(t *testing.T) {
	v := Detect()
	_, err := os.Stat(filepath.Join(Root, "cgroup.controllers"))
	if want := map[bool]Version{true: V2, false: V1}[err == nil]; v != want {
		t.Fatalf("Detect() = %v, want %v", v, want)
	}
	t.Logf("host cgroups: %v", v)
}

func TestDirs(t *testing.T) {
	for _, bad := range []string{"", "/", "../x", "/a/../../b"} {
		if _, err := Dirs(bad); err == nil {
			t.Errorf("Dirs(%q) succeeded, want error", bad)
		}
	}
	dirs, err := Dirs("corral/x")
	if err != nil {
		t.Skipf("no cgroup mounts readable: %v", err)
	}
	if len(dirs) == 0 {
		t.Skip("no cgroup hierarchy mounted")
	}
	for _, d := range dirs {
		if filepath.Base(d) != "x" || filepath.Base(filepath.Dir(d)) != "corral" {
			t.Errorf("dir %s does not end in corral/x", d)
		}
	}
	if Detect() == V2 && len(dirs) != 1 {
		t.Errorf("v2 host: got %d dirs, want 1: %v", len(dirs), dirs)
	}
	mem, err := Dir("corral/x", "memory")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(dirs, mem) {
		t.Errorf("memory dir %s not among %v", mem, dirs)
	}
}

func TestRemoveKillsAndRemoves(t *testing.T) {
	requireRoot(t)
	parent, group := testGroup(t)
	if err := Create(group + "/child"); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for _, g := range []string{group, group + "/child"} {
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		if err := AddProcess(g, cmd.Process.Pid); err != nil {
			cmd.Process.Kill()
			t.Fatal(err)
		}
	}
	// Reap the sleepers as they die, as their parent must.
	done := make(chan error, len(cmds))
	for _, c := range cmds {
		go func() { done <- c.Wait() }()
	}
	pids, err := Procs(group)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if !slices.Contains(pids, c.Process.Pid) {
			t.Errorf("Procs(%s) = %v, missing %d", group, pids, c.Process.Pid)
		}
	}
	u, err := ReadUsage(group)
	if err != nil {
		t.Fatal(err)
	}
	if u.Pids == 0 || u.MemoryBytes == 0 {
		t.Errorf("ReadUsage = %+v, want pids and memory > 0", u)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Remove(ctx, group); err != nil {
		t.Fatal(err)
	}
	for range cmds {
		err := <-done
		if ws, ok := exitStatus(err); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("sleeper ended with %v, want SIGKILL", err)
		}
	}
	if ok, err := Exists(group); err != nil || ok {
		t.Errorf("Exists(%s) after Remove = %v, %v", group, ok, err)
	}
	if ok, _ := Exists(parent); !ok {
		t.Errorf("Remove(%s) removed the parent %s too", group, parent)
	}
	// A second Remove, and a Remove of a group that never existed, are fine.
	if err := Remove(ctx, group); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	if err := Remove(ctx, parent+"/never"); err != nil {
		t.Errorf("Remove of missing group: %v", err)
	}
}

func exitStatus(err error) (syscall.WaitStatus, bool) {
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return 0, false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ws, ok
}

func TestRemoveFrozen(t *testing.T) {
	requireRoot(t)
	_, group := testGroup(t)
	if err := Create(group); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := AddProcess(group, cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	if Detect() == V2 {
		d, _ := Dir(group, "")
		if err := os.WriteFile(filepath.Join(d, "cgroup.freeze"), []byte("1"), 0); err != nil {
			t.Skipf("cannot freeze: %v", err)
		}
	} else {
		d, err := Dir(group, "freezer")
		if err != nil {
			t.Skipf("no freezer: %v", err)
		}
		if err := os.WriteFile(filepath.Join(d, "freezer.state"), []byte("FROZEN"), 0); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Remove(ctx, group); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("frozen sleeper survived Remove")
	}
}
