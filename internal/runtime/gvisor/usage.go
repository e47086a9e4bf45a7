package gvisor

import (
	"corral/internal/cgroups"
	"corral/internal/runtime"
)

// MemoryUsage is the memory charged to the sandbox's cgroup (sentry,
// gofer and the guest's memory file; page cache included).
func (r *Runtime) MemoryUsage(ref runtime.Ref) (int64, error) {
	if err := ref.Check(); err != nil {
		return 0, err
	}
	u, err := cgroups.ReadUsage(r.cgroup(ref.ID))
	return int64(u.MemoryBytes), err
}
