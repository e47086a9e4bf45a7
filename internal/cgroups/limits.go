package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Limits are the resource controls of a group; zero leaves one unset.
type Limits struct {
	// CPUWeight is the relative share, 1 to 10000 (cgroup v2 cpu.weight;
	// mapped to v1 cpu.shares).
	CPUWeight uint64
	// CPUQuotaMilli is the ceiling in 1/1000 CPUs (cpu.max or
	// cpu.cfs_quota_us over a 100 ms period).
	CPUQuotaMilli int64
	// MemoryBytes is the hard memory limit (memory.max or
	// memory.limit_in_bytes).
	MemoryBytes int64
	// Pids bounds the number of tasks.
	Pids int64
}

const cpuPeriodUS = 100000

// SetLimits writes l to group, which must exist (Create).
func SetLimits(group string, l Limits) error {
	v2 := Detect() == V2
	var writes []struct{ controller, file, value string }
	add := func(c, f, v string) {
		writes = append(writes, struct{ controller, file, value string }{c, f, v})
	}
	if l.CPUWeight > 0 {
		if v2 {
			add("cpu", "cpu.weight", strconv.FormatUint(l.CPUWeight, 10))
		} else {
			// v1 shares 2..262144; the runc mapping inverted.
			add("cpu", "cpu.shares", strconv.FormatUint(2+(l.CPUWeight-1)*262142/9999, 10))
		}
	}
	if l.CPUQuotaMilli > 0 {
		quota := l.CPUQuotaMilli * cpuPeriodUS / 1000
		if v2 {
			add("cpu", "cpu.max", fmt.Sprintf("%d %d", quota, cpuPeriodUS))
		} else {
			add("cpu", "cpu.cfs_period_us", strconv.Itoa(cpuPeriodUS))
			add("cpu", "cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
		}
	}
	if l.MemoryBytes > 0 {
		if v2 {
			add("memory", "memory.max", strconv.FormatInt(l.MemoryBytes, 10))
		} else {
			add("memory", "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10))
		}
	}
	if l.Pids > 0 {
		add("pids", "pids.max", strconv.FormatInt(l.Pids, 10))
	}
	for _, w := range writes {
		dir, err := Dir(group, w.controller)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, w.file), []byte(w.value), 0); err != nil {
			return fmt.Errorf("setting %s of %s: %w", w.file, group, err)
		}
	}
	return nil
}
