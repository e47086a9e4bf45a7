package vm

import (
	"corral/internal/cgroups"
	"corral/internal/runtime"
)

// MemoryUsage is the memory charged to the sandbox's QEMU cgroup (the
// guest's RAM as far as it was touched, and QEMU's own).
func (r *Runtime) MemoryUsage(ref runtime.Ref) (int64, error) {
	if err := ref.Check(); err != nil {
		return 0, err
	}
	u, err := cgroups.ReadUsage(r.cgroup(ref.ID))
	return int64(u.MemoryBytes), err
}
