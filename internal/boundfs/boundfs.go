// Package boundfs bounds what a sandbox can make land on the host through
// the few host paths it writes by design (the gVisor agent's channel
// directory, PID 1's output, a vm guest's serial console and QEMU's log):
// each lives on a small tmpfs of its own, mounted under the sandbox's
// directory with a size and inode limit and nosuid, nodev and noexec, so
// the bound holds while no daemon runs (sandboxes outlive a restart) and
// nothing written there is a setuid or device file usable on the host. The
// logs on such a mount are rotated while the daemon runs (Rotate): their
// writers append (O_APPEND), so truncating them is safe.
//
// The mounts are tmpfs: their pages are host memory charged to the cgroup
// of the process that writes them (the sandbox's), never host disk.
//
// It imports nothing from Corral.
package boundfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Limits bound one mount.
type Limits struct {
	// Bytes is the mount's size (tmpfs size=, rounded up to pages).
	Bytes int64
	// Inodes bounds its entries, its root directory included (nr_inodes=).
	Inodes int
}

// Bounds of the mounts the runtimes make.
var (
	// Channel is a gVisor sandbox's agent channel directory: one socket,
	// which a guest's --host-uds bind creates. runsc's gofer keeps the
	// host socket of every listener the agent closes for a checkpoint
	// (pause, memory snapshot, fork), each holding an inode: the inode
	// bound is sized for a sandbox's snapshots over its life, not its one
	// socket (with 8, the seventh snapshot left the agent no room to
	// listen again). Empty inodes cost no bytes of the size.
	Channel = Limits{Bytes: 64 << 10, Inodes: 1024}
	// Logs holds a sandbox's console (and QEMU's) logs: each rotated at
	// LogRotateBytes, keeping one previous part, so 4 MiB leaves the logs
	// room to grow while no daemon rotates them.
	Logs = Limits{Bytes: 4 << 20, Inodes: 16}
)

// LogRotateBytes is the size past which Rotate starts a log afresh.
const LogRotateBytes = 1 << 20

// flags of every mount: nothing on it runs, is setuid, or is a device.
const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC

// Mount makes dir a tmpfs bounded by l, owned by root with mode 0700,
// creating dir if needed. It does nothing when dir already is a tmpfs
// mount point (a paused or adopted sandbox's).
func Mount(dir string, l Limits) error {
	if l.Bytes <= 0 || l.Inodes <= 0 {
		return fmt.Errorf("bounded mount %s: limits %+v must be positive", dir, l)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("bounded mount %s: %w", dir, err)
	}
	if ok, err := Mounted(dir); err != nil || ok {
		return err
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=0,gid=0", l.Bytes, l.Inodes)
	if err := unix.Mount("corral-bound", dir, "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("bounded mount %s: mounting tmpfs: %w", dir, err)
	}
	return nil
}

// Mounted reports whether dir is the root of a tmpfs mount: a tmpfs on a
// device other than its parent directory's.
func Mounted(dir string) (bool, error) {
	dir = filepath.Clean(dir)
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("bounded mount %s: %w", dir, err)
	}
	if fs.Type != unix.TMPFS_MAGIC {
		return false, nil
	}
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, fmt.Errorf("bounded mount %s: %w", dir, err)
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("bounded mount %s: %w", dir, err)
	}
	return st.Dev != parent.Dev, nil
}

// Unmount detaches the mount at dir, if there is one; what was on it goes.
func Unmount(dir string) error {
	ok, err := Mounted(dir)
	if err != nil || !ok {
		return err
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("bounded mount %s: unmounting: %w", dir, err)
	}
	return nil
}
