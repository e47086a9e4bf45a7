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

// OOMKills counts the OOM kills in the sandbox's cgroup
// (runtime.OOMCounter): the host kills the stub of a guest process that
// allocated past the limit (gVisor then kills that process with SIGKILL),
// or the sentry itself, which ends the sandbox.
func (r *Runtime) OOMKills(ctx context.Context, ref runtime.Ref) (uint64, string, error) {
	if err := ref.Check(); err != nil {
		return 0, "", err
	}
	o, err := cgroups.ReadOOM(r.cgroup(ref.ID))
	return o.Kills, runtime.OOMDetail(o.LimitBytes), err
}
