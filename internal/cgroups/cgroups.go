// Package cgroups finds, inspects and removes the host cgroups that hold a
// sandbox, on both cgroup v1 (one hierarchy per controller, as on hybrid
// hosts) and pure cgroup v2 (one unified hierarchy).
//
// A group is named by its absolute path inside the hierarchy, e.g.
// "/corral/sb-x1"; the package maps it to a directory in every mounted
// hierarchy. It deliberately knows nothing about sandboxes or runtimes and
// imports nothing from Corral.
package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"corral/internal/mountinfo"
)

// Version is the cgroup layout of the host.
type Version int

const (
	// V1 means controllers live in separate v1 hierarchies (a cgroup2
	// mount without controllers may exist beside them: "hybrid").
	V1 Version = 1
	// V2 means one unified cgroup2 hierarchy holds every controller.
	V2 Version = 2
)

// String returns "v1" or "v2".
func (v Version) String() string { return "v" + strconv.Itoa(int(v)) }

// Root is where the host's cgroup filesystems are mounted.
const Root = "/sys/fs/cgroup"

// Detect reports the host's cgroup layout: V2 when Root itself is a cgroup2
// mount (it has cgroup.controllers), V1 otherwise.
func Detect() Version {
	if _, err := os.Stat(filepath.Join(Root, "cgroup.controllers")); err == nil {
		return V2
	}
	return V1
}

// hierarchy is one mounted cgroup hierarchy.
type hierarchy struct {
	mountpoint  string
	controllers []string // v1 controllers (and "name=x" options); nil for cgroup2
	v2          bool
}

// hierarchies returns every cgroup (v1) and cgroup2 mount visible to this
// process, one per mount point.
func hierarchies() ([]hierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var hs []hierarchy
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+3 > len(fields) {
			continue
		}
		fstype, mp := fields[sep+1], mountinfo.Unescape(fields[4])
		if (fstype != "cgroup" && fstype != "cgroup2") || seen[mp] {
			continue
		}
		seen[mp] = true
		h := hierarchy{mountpoint: mp, v2: fstype == "cgroup2"}
		if !h.v2 {
			for _, o := range strings.Split(fields[sep+3], ",") {
				if o != "rw" && o != "ro" && !strings.Contains(o, "=") || strings.HasPrefix(o, "name=") {
					h.controllers = append(h.controllers, o)
				}
			}
		}
		hs = append(hs, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	return hs, nil
}

// clean validates a group name and returns it as a clean absolute path.
func clean(group string) (string, error) {
	g := path.Clean("/" + group)
	if g == "/" || strings.Contains(group, "..") {
		return "", fmt.Errorf("invalid cgroup %q", group)
	}
	return g, nil
}

// Dirs returns the directory of group in every mounted hierarchy, whether or
// not it exists. On V1 there is one per hierarchy (cpu, memory, pids, ...,
// and the controller-less cgroup2 mount of hybrid hosts); on V2 there is one.
func Dirs(group string) ([]string, error) {
	g, err := clean(group)
	if err != nil {
		return nil, err
	}
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	dirs := make([]string, 0, len(hs))
	for _, h := range hs {
		dirs = append(dirs, filepath.Join(h.mountpoint, g))
	}
	return dirs, nil
}

// Dir returns the directory of group in the hierarchy holding controller
// ("memory", "cpu", "pids", ...). On V2 that is the unified hierarchy.
func Dir(group, controller string) (string, error) {
	g, err := clean(group)
	if err != nil {
		return "", err
	}
	hs, err := hierarchies()
	if err != nil {
		return "", err
	}
	v2 := ""
	for _, h := range hs {
		if h.v2 {
			if h.mountpoint == Root {
				v2 = h.mountpoint
			}
			continue
		}
		for _, c := range h.controllers {
			if c == controller {
				return filepath.Join(h.mountpoint, g), nil
			}
		}
	}
	if v2 != "" {
		return filepath.Join(v2, g), nil
	}
	return "", fmt.Errorf("cgroup controller %q is not mounted", controller)
}

// Exists reports whether group exists in any hierarchy.
func Exists(group string) (bool, error) {
	dirs, err := Dirs(group)
	if err != nil {
		return false, err
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			return true, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
	}
	return false, nil
}

// Procs returns the ids of every process in group or any group below it,
// across every hierarchy, without duplicates.
func Procs(group string) ([]int, error) {
	dirs, err := Dirs(group)
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	var pids []int
	for _, d := range dirs {
		err := walkPostOrder(d, func(dir string) error {
			ps, err := readProcs(dir)
			for _, p := range ps {
				if !seen[p] {
					seen[p] = true
					pids = append(pids, p)
				}
			}
			return err
		})
		if err != nil {
			return pids, err
		}
	}
	return pids, nil
}

// readProcs reads dir/cgroup.procs; a missing group has no processes.
func readProcs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNoDevice) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// walkPostOrder calls fn for every directory under root (root included),
// children before parents, so fn may remove the directory it is given. A
// missing root is not an error.
func walkPostOrder(root string, fn func(dir string) error) error {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", root, err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, walkPostOrder(filepath.Join(root, e.Name()), fn))
		}
	}
	errs = append(errs, fn(root))
	return errors.Join(errs...)
}
