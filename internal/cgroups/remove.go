package cgroups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

var errNoDevice = syscall.ENODEV

// pollInterval is how often Remove rechecks a group it is emptying.
const pollInterval = 5 * time.Millisecond

// Create makes group in every hierarchy (its parents too). On V1 a new
// cpuset group inherits its parent's cpus and mems, without which no task
// could join it. On V2 it enables the controllers the root offers in each
// ancestor's cgroup.subtree_control, as far as the kernel allows.
func Create(group string) error {
	g, err := clean(group)
	if err != nil {
		return err
	}
	dirs, err := Dirs(g)
	if err != nil {
		return err
	}
	if Detect() == V2 {
		enableControllers(g)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
	}
	if Detect() == V1 {
		if d, err := Dir(g, "cpuset"); err == nil {
			if err := fillCpuset(d); err != nil {
				return fmt.Errorf("creating cgroup %s: %w", g, err)
			}
		}
	}
	return nil
}

// fillCpuset copies cpuset.cpus and cpuset.mems down from the nearest
// ancestor that has them, for dir and every empty ancestor in between.
func fillCpuset(dir string) error {
	if filepath.Dir(dir) == dir {
		return nil
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if len(b) > 1 {
			continue
		}
		parent := filepath.Dir(dir)
		if err := fillCpuset(parent); err != nil {
			return err
		}
		pb, err := os.ReadFile(filepath.Join(parent, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), pb, 0); err != nil {
			return fmt.Errorf("writing %s: %w", f, err)
		}
	}
	return nil
}

// enableControllers turns on, best effort, every controller the v2 root
// offers in the subtree_control of each ancestor of g (not g itself, which
// would forbid processes in g). Failures leave the controller off, which
// the caller sees when it writes a limit.
func enableControllers(g string) {
	avail, err := os.ReadFile(filepath.Join(Root, "cgroup.controllers"))
	if err != nil {
		return
	}
	dir := Root
	for _, part := range splitPath(filepath.Dir(g)) {
		for _, c := range fieldsOf(avail) {
			_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0)
		}
		dir = filepath.Join(dir, part)
		_ = os.Mkdir(dir, 0o755)
	}
	for _, c := range fieldsOf(avail) {
		_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0)
	}
}

// AddProcess moves pid into group in every hierarchy where group exists.
func AddProcess(group string, pid int) error {
	dirs, err := Dirs(group)
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("adding pid %d to %s: %w", pid, d, err)
		}
	}
	return nil
}

// Remove kills every process left in group or below it, waits for them to
// leave, and removes the group's directories in every hierarchy, children
// first. A group that does not exist is not an error. It gives up when ctx
// is done, returning what still stood in the way.
func Remove(ctx context.Context, group string) error {
	dirs, err := Dirs(group)
	if err != nil {
		return err
	}
	for {
		// Every hierarchy is thawed and signalled before any rmdir: a task
		// frozen in the freezer hierarchy keeps the cpu group busy too.
		var errs []error
		for _, d := range dirs {
			errs = append(errs, walkPostOrder(d, killAll))
		}
		for _, d := range dirs {
			errs = append(errs, walkPostOrder(d, rmdir))
		}
		err := errors.Join(errs...)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("removing cgroup %s: %w (%v)", group, err, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// killAll thaws dir and sends SIGKILL to every process in it. Processes
// take a moment to leave after that, so rmdir may still fail with EBUSY.
func killAll(dir string) error {
	thaw(dir)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err == nil {
		return nil
	}
	// No cgroup.kill (v1, or v2 before Linux 5.14): signal one by one.
	pids, err := readProcs(dir)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return err
}

// rmdir removes an empty cgroup directory; a missing one is fine.
func rmdir(dir string) error {
	err := os.Remove(dir)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("%s: %w", dir, err)
}

// thaw unfreezes dir so that SIGKILL can be delivered to its tasks.
func thaw(dir string) {
	if b, err := os.ReadFile(filepath.Join(dir, "freezer.state")); err == nil && string(b) != "THAWED\n" {
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.freeze")); err == nil && string(b) != "0\n" {
		_ = os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0)
	}
}
