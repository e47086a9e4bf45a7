package vm

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"

	"corral/internal/cgroups"
	"corral/internal/errdefs"
	"corral/internal/runtime"
)

var _ runtime.Meter = (*Runtime)(nil)

// scratchNames are the names a sandbox's scratch disk has in its
// directory: a cold start's, and a copy's of a memory snapshot.
var scratchNames = []string{"scratch.ext4", "scratch.img"}

// Usage measures a running guest from the host: CPU time and working set
// of QEMU's cgroup (the guest's memory as it touches it, plus QEMU and
// TCG's translation cache), and the blocks allocated to its sparse scratch
// disk, which holds the root overlay's upper layer: what the guest wrote,
// plus ext4's own metadata; blocks the guest freed come back when it
// discards them (the drive passes discards through).
func (r *Runtime) Usage(_ context.Context, ref runtime.Ref) (runtime.Usage, error) {
	if err := ref.Check(); err != nil {
		return runtime.Usage{}, err
	}
	m, err := cgroups.ReadMeter(r.cgroup(ref.ID))
	if err != nil {
		return runtime.Usage{}, fmt.Errorf("%w: sandbox %s: %v", errdefs.ErrFailedPrecondition, ref.ID, err)
	}
	u := runtime.Usage{CPUNanos: m.CPUNanos, MemoryBytes: m.WorkingSetBytes}
	for _, n := range scratchNames {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(ref.Dir, n), &st) == nil {
			u.DiskBytes += uint64(st.Blocks) * 512
		}
	}
	return u, nil
}
