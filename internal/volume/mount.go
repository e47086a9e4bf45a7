package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
)

// HostDir returns the directory where volume name's file system is
// mounted on the host, mounting its image first if it is not (after a
// host reboot, or the first time). The
// mount is nosuid and nodev: what a sandbox writes there is never a
// setuid or device file usable on the host. It outlives the daemon: a
// gVisor sandbox adopted after a restart keeps its bind of it. The
// caller holds Lock(name).
func (s *Store) HostDir(ctx context.Context, name string) (string, error) {
	if _, err := s.Get(name); err != nil {
		return "", err
	}
	dir := s.path(name, mountDir)
	mounted, err := isMountPoint(dir)
	if err != nil {
		return "", fmt.Errorf("volume %q: %w", name, err)
	}
	if mounted {
		return dir, nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	img := s.Image(name)
	if err := fsck(ctx, name, img); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "mount", "-t", "ext4", "-o", "loop,nosuid,nodev", img, dir).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mounting volume %q: %v: %s", name, err, lastLine(out))
	}
	s.log.Info("volume mounted on the host", "op", "volume", "volume", name)
	return dir, nil
}

// Unmount takes volume name's host mount away (its loop device goes with
// it), before the volume is removed; not mounted is no error.
// The caller holds Lock(name).
func (s *Store) Unmount(ctx context.Context, name string) error {
	dir := s.path(name, mountDir)
	mounted, err := isMountPoint(dir)
	if err != nil || !mounted {
		return err
	}
	if err := unix.Unmount(dir, 0); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("%w: volume %q is busy on the host", errdefs.ErrFailedPrecondition, name)
		}
		return fmt.Errorf("unmounting volume %q: %w", name, err)
	}
	s.log.Info("volume unmounted from the host", "op", "volume", "volume", name)
	return nil
}

// fsck checks img before a mount: a host crash while it was mounted, or
// a guest killed while it wrote, may leave it needing a journal replay or
// a repair ext4 would refuse to mount without. -p repairs what is safe.
// -f checks every time, not only when the file system says it is unclean:
// images that a vm guest once wrote as a raw disk (before volumes on vm
// went over NFS) carry metadata that is the guest's word until checked,
// and the host kernel is about to parse it (docs/SECURITY.md, "Volumes").
func fsck(ctx context.Context, name, img string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "e2fsck", "-f", "-p", img).CombinedOutput()
	var ee *exec.ExitError
	// 1: errors corrected; anything above is left for an operator.
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() > 1) {
		return fmt.Errorf("%w: volume %q needs repair: e2fsck: %s", errdefs.ErrFailedPrecondition, name, lastLine(out))
	}
	return nil
}

// Usage returns the bytes used and the size of volume name's file system
// while it is mounted on the host (ok false otherwise).
func (s *Store) Usage(name string) (used, size int64, ok bool) {
	dir := s.path(name, mountDir)
	if m, err := isMountPoint(dir); err != nil || !m {
		return 0, 0, false
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	bs := int64(st.Bsize)
	return (int64(st.Blocks) - int64(st.Bfree)) * bs, int64(st.Blocks) * bs, true
}

// isMountPoint reports whether dir is a different file system from its
// parent's.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	if err := unix.Lstat(dir+"/..", &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
