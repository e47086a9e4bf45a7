package runtime

import "context"

// Meter is a runtime that measures what a running sandbox uses, from the
// host's side: numbers the guest can neither see differently nor fake,
// cheap enough to read every few seconds (a handful of small reads). The
// manager's metrics sampler calls it.
type Meter interface {
	Usage(ctx context.Context, ref Ref) (Usage, error)
}

// Usage is one measurement of a running sandbox.
type Usage struct {
	// CPUNanos is the CPU time everything the sandbox runs on the host
	// has used so far (its cgroup: for gVisor the sandbox and gofer, for
	// vm QEMU). It may start again from zero when the runtime recreates
	// the sandbox's processes (a resume).
	CPUNanos uint64
	// MemoryBytes is the memory its cgroup holds that the kernel cannot
	// simply drop: the charge less inactive file cache (the "working
	// set"). For vm it includes QEMU's own memory besides the guest's.
	MemoryBytes uint64
	// DiskBytes is what the private writable layer takes on the host's
	// disk now: allocated blocks, not apparent size.
	DiskBytes uint64
}
