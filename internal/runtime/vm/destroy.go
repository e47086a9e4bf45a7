package vm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"corral/internal/boundfs"
	"corral/internal/cgroups"
	"corral/internal/runtime"
)

// Destroy kills the sandbox's QEMU and removes its cgroup, its files and
// its index entry. Idempotent.
func (r *Runtime) Destroy(ctx context.Context, ref runtime.Ref) error {
	if err := ref.Check(); err != nil {
		return err
	}
	if err := r.killQEMU(ctx, ref); err != nil {
		return err
	}
	if err := cgroups.Remove(ctx, r.cgroup(ref.ID)); err != nil {
		return fmt.Errorf("removing the cgroup of %s: %w", ref.ID, err)
	}
	if err := r.releaseUIDs(ref.ID); err != nil {
		return fmt.Errorf("releasing the QEMU uid of %s: %w", ref.ID, err)
	}
	if err := boundfs.Unmount(filepath.Join(ref.Dir, logDir)); err != nil {
		return err
	}
	if err := os.RemoveAll(ref.Dir); err != nil {
		return fmt.Errorf("removing %s: %w", ref.Dir, err)
	}
	if err := os.Remove(r.indexPath(ref.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// killQEMU SIGKILLs the sandbox's QEMU and waits until it is gone.
func (r *Runtime) killQEMU(ctx context.Context, ref runtime.Ref) error {
	pid, ok := readPid(ref.Dir)
	if !ok || !qemuAlive(pid, ref.Dir) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing qemu %d: %w", pid, err)
	}
	for qemuAlive(pid, ref.Dir) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("qemu %d of %s did not exit: %w", pid, ref.ID, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	_ = os.Remove(filepath.Join(ref.Dir, pidFile))
	return nil
}
