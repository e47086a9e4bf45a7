package gvisor

import (
	"errors"
	"path/filepath"

	"corral/internal/boundfs"
	"corral/internal/runtime"
)

// What a gVisor sandbox writes on the host by design, and its bound:
//
//   - chan/: the agent's channel directory, bind-mounted read-write at
//     /.corral/run so that the agent can create its socket there through
//     --host-uds=create; a tmpfs of boundfs.Channel (64 KiB, 1,024 inodes),
//     nosuid, nodev, noexec;
//   - log/console.log: stdout and stderr of PID 1 (and of runsc), which
//     any guest process can write through /proc/1/fd/1; a tmpfs of
//     boundfs.Logs (4 MiB), rotated at 1 MiB while the daemon runs;
//   - upper/: the private writable layer's file (runsc keeps it open and
//     unlinked), bounded by disk_mb (--overlay2 size=);
//   - checkpoint/ while paused: memory and the writable layer.
//
// Everything else the guest writes is gVisor's memory (/tmp, which runsc
// mounts as a tmpfs, /dev/shm, pipes), charged to the sandbox's cgroup.

var _ runtime.LogRotator = (*Runtime)(nil)

// mountBounded mounts the sandbox's channel and log directories (each a
// bounded tmpfs); it does nothing for one already mounted.
func mountBounded(dir string) error {
	if err := boundfs.Mount(filepath.Join(dir, chanDirName), boundfs.Channel); err != nil {
		return err
	}
	return boundfs.Mount(filepath.Join(dir, logDirName), boundfs.Logs)
}

// boundedMounts are the mount points mountBounded makes under dir.
func boundedMounts(dir string) []string {
	return []string{filepath.Join(dir, chanDirName), filepath.Join(dir, logDirName)}
}

// RotateLogs keeps the sandbox's console log (PID 1's output) within
// boundfs.LogRotateBytes, and the one of a sandbox started before the log
// mount existed, which has no other bound.
func (r *Runtime) RotateLogs(ref runtime.Ref) error {
	if err := ref.Check(); err != nil {
		return err
	}
	var errs []error
	for _, name := range []string{consoleLog, legacyConsoleLog} {
		if _, err := boundfs.Rotate(filepath.Join(ref.Dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
