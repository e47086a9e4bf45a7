package inproc

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"corral/internal/errdefs"
	"corral/internal/runtime"
)

var _ runtime.Meter = (*Runtime)(nil)

// Usage measures what an in-process "sandbox" can be measured by, which
// is as little isolated as the rest of it: the test process's CPU time
// and resident memory (shared by every sandbox of the runtime), and the
// blocks of the files in the sandbox's private root.
func (r *Runtime) Usage(_ context.Context, ref runtime.Ref) (runtime.Usage, error) {
	if err := ref.Check(); err != nil {
		return runtime.Usage{}, err
	}
	r.mu.Lock()
	b := r.boxes[ref.ID]
	r.mu.Unlock()
	if b == nil || b.dead {
		return runtime.Usage{}, fmt.Errorf("%w: sandbox %s is not running", errdefs.ErrFailedPrecondition, ref.ID)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return runtime.Usage{}, err
	}
	u := runtime.Usage{CPUNanos: uint64(ru.Utime.Nano() + ru.Stime.Nano()), MemoryBytes: residentBytes()}
	_ = filepath.WalkDir(filepath.Join(ref.Dir, "root"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil {
			u.DiskBytes += uint64(st.Blocks) * 512
		}
		return nil
	})
	return u, nil
}

// residentBytes is this process's resident memory, from /proc/self/statm.
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}
