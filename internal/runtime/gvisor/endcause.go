package gvisor

import (
	"context"

	"corral/internal/cgroups"
	"corral/internal/runtime"
)

// EndCause names why a sandbox ended by itself: out of memory when the
// host kernel's OOM killer killed a process of its cgroup (the sentry,
// which takes the whole sandbox with it). The cgroup outlives the
// sandbox's processes until Destroy, so the count is still there to read.
func (r *Runtime) EndCause(ctx context.Context, ref runtime.Ref) (string, string) {
	if ref.Check() != nil {
		return "", ""
	}
	o, err := cgroups.ReadOOM(r.cgroup(ref.ID))
	if err != nil || o.Kills == 0 && !o.Under {
		return "", ""
	}
	return runtime.CauseOOM, runtime.OOMDetail(o.LimitBytes)
}
