package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
)

// OOM is what a group's memory controller says about out-of-memory kills.
type OOM struct {
	// Kills counts the processes the kernel's OOM killer killed in the
	// group because it reached its memory limit.
	Kills uint64
	// Under is true while the group is out of memory now (cgroup v1's
	// under_oom; v2 has no such flag).
	Under bool
	// LimitBytes is the group's hard memory limit; 0 when it has none.
	LimitBytes uint64
}

// ReadOOM reads group's OOM kill count and memory limit: cgroup v2's
// memory.events and memory.max, v1's memory.oom_control (whose oom_kill
// line kernels since 4.13 have) and memory.limit_in_bytes. A group that
// does not exist (any more) is an error.
func ReadOOM(group string) (OOM, error) {
	var o OOM
	g, err := clean(group)
	if err != nil {
		return o, err
	}
	dir := filepath.Join(Root, g)
	events, limit := "memory.events", "memory.max"
	if Detect() == V1 {
		if dir, err = Dir(group, "memory"); err != nil {
			return o, err
		}
		events, limit = "memory.oom_control", "memory.limit_in_bytes"
	}
	if _, err := os.Stat(dir); err != nil {
		return o, fmt.Errorf("reading the OOM events of cgroup %s: %w", group, err)
	}
	o.Kills, _ = statField(filepath.Join(dir, events), "oom_kill")
	under, _ := statField(filepath.Join(dir, events), "under_oom")
	o.Under = under > 0
	o.LimitBytes, _ = readUint(filepath.Join(dir, limit))
	// v1 writes "no limit" as a page-rounded maximum int64.
	if o.LimitBytes >= 1<<62 {
		o.LimitBytes = 0
	}
	return o, nil
}
