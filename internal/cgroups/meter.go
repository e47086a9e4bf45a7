package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Meter is what a group has used, for a metrics sampler: its CPU time so
// far and its working set now.
type Meter struct {
	CPUNanos uint64
	// WorkingSetBytes is the memory charged to the group that the kernel
	// cannot simply drop: the charge less the inactive file cache (what
	// kubelet and docker stats report as a container's memory use).
	WorkingSetBytes uint64
}

// ReadMeter reads group's CPU time and working set with one look at the
// mounts: v1 reads cpuacct.usage, memory.usage_in_bytes and memory.stat's
// total_inactive_file; v2 cpu.stat's usage_usec, memory.current and
// memory.stat's inactive_file. A group without a memory directory (gone,
// or never made) is an error wrapping os.ErrNotExist.
func ReadMeter(group string) (Meter, error) {
	var m Meter
	g, err := clean(group)
	if err != nil {
		return m, err
	}
	cpuDir, memDir, v2, err := meterDirs(g)
	if err != nil {
		return m, fmt.Errorf("reading cgroup %s: %w", group, err)
	}
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file"
	if v2 {
		usageFile, inactiveKey = "memory.current", "inactive_file"
		if usec, ok := statField(filepath.Join(cpuDir, "cpu.stat"), "usage_usec"); ok {
			m.CPUNanos = usec * 1000
		}
	} else if cpuDir != "" {
		m.CPUNanos, _ = readUint(filepath.Join(cpuDir, "cpuacct.usage"))
	}
	usage, err := readUint(filepath.Join(memDir, usageFile))
	if err != nil {
		return m, fmt.Errorf("reading memory of cgroup %s: %w", group, err)
	}
	inactive, _ := statField(filepath.Join(memDir, "memory.stat"), inactiveKey)
	if inactive < usage {
		m.WorkingSetBytes = usage - inactive
	}
	return m, nil
}

// meterDirs returns the directories of clean group g holding CPU
// accounting ("" when no hierarchy has it) and memory, and whether they
// are cgroup v2's.
func meterDirs(g string) (cpuDir, memDir string, v2 bool, err error) {
	if Detect() == V2 {
		d := filepath.Join(Root, g)
		if _, err := os.Stat(d); err != nil {
			return "", "", true, err
		}
		return d, d, true, nil
	}
	hs, err := hierarchies()
	if err != nil {
		return "", "", false, err
	}
	for _, h := range hs {
		if h.v2 {
			continue
		}
		if slices.Contains(h.controllers, "cpuacct") {
			cpuDir = filepath.Join(h.mountpoint, g)
		}
		if slices.Contains(h.controllers, "memory") {
			memDir = filepath.Join(h.mountpoint, g)
		}
	}
	if memDir == "" {
		return "", "", false, fmt.Errorf("the memory controller is not mounted")
	}
	if _, err := os.Stat(memDir); err != nil {
		return "", "", false, err
	}
	return cpuDir, memDir, false, nil
}
