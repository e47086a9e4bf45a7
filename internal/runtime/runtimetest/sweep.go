package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"corral/internal/cgroups"
	"corral/internal/mountinfo"
)

// Scratch is a runtime test package's own cgroup parent and temporary
// directory, named prefix-PID so that a later run can tell a crashed
// run's leftovers from a live run's.
type Scratch struct {
	Cgroup string // "/prefix-PID"
	Dir    string // a new directory under os.TempDir(), "prefix-PID-*"
}

// NewScratch sweeps what crashed runs of the package left (SweepDead) and
// makes this run's directory; the cgroup is the runtime's to create.
func NewScratch(prefix string) (Scratch, error) {
	if err := SweepDead(prefix); err != nil {
		fmt.Fprintf(os.Stderr, "%s: sweeping earlier runs: %v\n", prefix, err)
	}
	pid := os.Getpid()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s-%d-", prefix, pid))
	if err != nil {
		return Scratch{}, err
	}
	return Scratch{Cgroup: fmt.Sprintf("/%s-%d", prefix, pid), Dir: dir}, nil
}

// SweepDead removes the cgroup parents /prefix-PID (killing what runs in
// them) and the temporary directories prefix-PID-* (after unmounting
// what is mounted under them) whose PID no longer runs: a crashed or
// killed run's, which would otherwise keep sandboxes running and mounts
// pinned. A live run's are left alone, so two runs may share a host.
func SweepDead(prefix string) error {
	var errs []error
	groups := map[string]bool{}
	for _, pattern := range []string{"/sys/fs/cgroup/" + prefix + "-*", "/sys/fs/cgroup/*/" + prefix + "-*"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if deadOwner(filepath.Base(m), prefix) {
				groups["/"+filepath.Base(m)] = true
			}
		}
	}
	for g := range groups {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, cgroups.Remove(ctx, g))
		cancel()
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"-*"))
	for _, d := range dirs {
		if !deadOwner(filepath.Base(d), prefix) {
			continue
		}
		errs = append(errs, mountinfo.UnmountUnder(d), os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// deadOwner reports whether name is prefix-PID or prefix-PID-... with a
// PID no process has.
func deadOwner(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok {
		return false
	}
	pidText, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}
