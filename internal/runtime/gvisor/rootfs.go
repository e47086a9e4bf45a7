package gvisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"corral/internal/errdefs"
)

// PrepareRootFS creates, in the root filesystem dir, the mount points this
// runtime binds the agent (/.corral/corral, an empty file) and its socket
// directory (/.corral/run) onto. Whoever builds a root filesystem for the
// gvisor runtime calls it once, before the rootfs is shared: runsc's gofer
// creates missing mount points in the rootfs itself, which would write to a
// tree that must stay read-only, so Start refuses a rootfs without them.
// It is idempotent.
func PrepareRootFS(dir string) error {
	base := filepath.Join(dir, filepath.Dir(guestAgentPath))
	if err := os.MkdirAll(filepath.Join(dir, guestChanDir), 0o755); err != nil {
		return fmt.Errorf("preparing rootfs %s: %w", dir, err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		return fmt.Errorf("preparing rootfs %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, guestAgentPath), os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("preparing rootfs %s: %w", dir, err)
	}
	return f.Close()
}

// checkRootFS verifies that dir is a directory with the mount points
// PrepareRootFS makes, as regular file and directory (not symlinks).
func checkRootFS(dir string) error {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return errdefs.Invalid("rootfs", "%q is not a directory", dir)
	}
	for _, mp := range []struct {
		path string
		dir  bool
	}{{guestAgentPath, false}, {guestChanDir, true}} {
		fi, err := os.Lstat(filepath.Join(dir, mp.path))
		if err == nil && fi.IsDir() == mp.dir && (mp.dir || fi.Mode().IsRegular()) {
			continue
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("checking rootfs %s: %w", dir, err)
		}
		return fmt.Errorf("%w: rootfs %s lacks the mount point %s (build it with gvisor.PrepareRootFS or scripts/deps.sh)",
			errdefs.ErrFailedPrecondition, dir, mp.path)
	}
	return nil
}
