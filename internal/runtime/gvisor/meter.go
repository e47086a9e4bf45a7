package gvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"corral/internal/cgroups"
	"corral/internal/errdefs"
	"corral/internal/runtime"
)

var _ runtime.Meter = (*Runtime)(nil)

// Usage measures a running sandbox: CPU time and working set of its
// cgroup (the sandbox and gofer processes, whatever gVisor runs for it),
// and the allocated size of its private writable layer: runsc keeps that
// layer in a file it created under <dir>/upper and unlinked at once, open
// in the sandbox process, so it is found through that process's
// descriptors. gVisor punches holes for what the guest frees, so the
// figure falls when files are removed.
func (r *Runtime) Usage(_ context.Context, ref runtime.Ref) (runtime.Usage, error) {
	if err := ref.Check(); err != nil {
		return runtime.Usage{}, err
	}
	m, err := cgroups.ReadMeter(r.cgroup(ref.ID))
	if err != nil {
		return runtime.Usage{}, fmt.Errorf("%w: sandbox %s: %v", errdefs.ErrFailedPrecondition, ref.ID, err)
	}
	u := runtime.Usage{CPUNanos: m.CPUNanos, MemoryBytes: m.WorkingSetBytes}
	if pid := r.sandboxPid(ref.ID); pid > 0 {
		u.DiskBytes = openBytesUnder(pid, filepath.Join(ref.Dir, upperDirName)+"/")
	}
	return u, nil
}

// sandboxPid is the pid of the sandbox process in runsc's state file for
// id, or 0.
func (r *Runtime) sandboxPid(id string) int {
	b, err := os.ReadFile(filepath.Join(r.cfg.Root, id+"_sandbox:"+id+".state"))
	if err != nil {
		return 0
	}
	var st runscState
	if json.Unmarshal(b, &st) != nil || st.Sandbox == nil {
		return 0
	}
	return st.Sandbox.Pid
}

// openBytesUnder sums the allocated bytes of the files process pid holds
// open under prefix (deleted ones included).
func openBytesUnder(pid int, prefix string) uint64 {
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return 0
	}
	var total uint64
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil || !strings.HasPrefix(link, prefix) {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(fdDir, e.Name()), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			total += uint64(st.Blocks) * 512
		}
	}
	return total
}
