package vminit

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// switchRoot moves /dev, /proc and /sys into the new root, frees the
// initramfs and makes the new root "/".
func switchRoot() error {
	for _, m := range []string{"/dev", "/proc", "/sys"} {
		dst := filepath.Join(newRoot, m)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m, dst, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("moving %s: %w", m, err)
		}
	}
	// The rest of the initramfs is never used again: free its memory.
	// /init's pages stay, as the agent bound at /.corral/corral.
	for _, p := range []string{"/init", "/lib", ModulesList} {
		_ = os.RemoveAll(p)
	}
	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.Mount(newRoot, "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving the new root to /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	return lateMounts()
}

// lateMounts gives the new root what a Linux userland expects: ptys,
// shared memory, /run, /tmp left alone (on disk), and cgroup2 (dockerd
// needs it).
func lateMounts() error {
	for _, m := range []struct {
		src, dst, fstype, data string
		flags                  uintptr
	}{
		{"devpts", "/dev/pts", "devpts", "newinstance,ptmxmode=0666,mode=0620", unix.MS_NOSUID | unix.MS_NOEXEC},
		{"tmpfs", "/dev/shm", "tmpfs", "mode=1777", unix.MS_NOSUID | unix.MS_NODEV},
		{"tmpfs", "/run", "tmpfs", "mode=0755", unix.MS_NOSUID | unix.MS_NODEV},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, m.flags, m.data); err != nil {
			return fmt.Errorf("mounting %s: %w", m.dst, err)
		}
	}
	// /dev/ptmx must be the new devpts instance's.
	_ = os.Remove("/dev/ptmx")
	if err := os.Symlink("pts/ptmx", "/dev/ptmx"); err != nil {
		return err
	}
	return nil
}

// NoFile is the agent's RLIMIT_NOFILE, soft and hard: 1,048,576, what
// gVisor's PID 1 gets (and the kernel's default fs.nr_open).
const NoFile = 1 << 20

// execAgent replaces this process with the agent, keeping PID 1.
func execAgent(cfg *Config) error {
	args := []string{"/.corral/corral", "agent", "--listen", "vport:" + AgentPort,
		"--upper", filepath.Join(ScratchInRoot, UpperDir)}
	for _, ns := range cfg.Nameservers {
		args = append(args, "--nameserver", ns)
	}
	// The agent and everything it runs get the open-file limit a gVisor
	// sandbox gives its PID 1 (the kernel's default, 1024, is what a vm
	// had): the same programs behave the same on both runtimes.
	lim := unix.Rlimit{Cur: NoFile, Max: NoFile}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raising the open-file limit: %w", err)
	}
	fmt.Fprintln(os.Stderr, ReadyLine)
	err := syscall.Exec(args[0], args, cfg.Env)
	return fmt.Errorf("exec %s: %w", args[0], err)
}
