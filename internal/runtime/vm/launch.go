package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/boundfs"
	"corral/internal/cgroups"
	"corral/internal/oomscore"
	"corral/internal/runtime"
)

// Files of a sandbox's bounded log mount (boundfs.Logs) and the fd set
// of the console.
const (
	logDir       = "log"
	consoleFDSet = 4
	// dirEnv, in QEMU's environment, names the sandbox directory, so a
	// recycled pid is never taken for the sandbox's QEMU (qemuAlive).
	dirEnv = "CORRAL_VM_DIR="
	// readyTimeout bounds QEMU's setup, from its start to its machine
	// protocol's greeting.
	readyTimeout = 30 * time.Second
)

// qemuIO is what QEMU gets as descriptors instead of paths: the listening
// sockets of the agent's channel and of QMP, the console, and the kernel
// and initramfs it loads.
type qemuIO struct {
	agent, qmp, console, kernel, initrd *os.File
}

func (io *qemuIO) close() {
	for _, f := range []*os.File{io.agent, io.qmp, io.console, io.kernel, io.initrd} {
		if f != nil {
			f.Close()
		}
	}
}

// openIO makes the sandbox's sockets (replacing any a previous QEMU
// left), opens its console on the bounded log mount and the kernel and
// initramfs m boots.
func (r *Runtime) openIO(dir string, m *machine) (*qemuIO, error) {
	io := &qemuIO{}
	var err error
	if io.agent, err = listenUnix(filepath.Join(dir, agentSock)); err != nil {
		return nil, err
	}
	if io.qmp, err = listenUnix(filepath.Join(dir, qmpSock)); err != nil {
		io.close()
		return nil, err
	}
	if io.console, err = openLog(dir, consoleFile); err != nil {
		io.close()
		return nil, err
	}
	if io.kernel, err = openReadable(r.kernel.vmlinuz()); err != nil {
		io.close()
		return nil, err
	}
	if io.initrd, err = openReadable(m.Initramfs); err != nil {
		io.close()
		return nil, err
	}
	return io, nil
}

// listenUnix binds a listening unix socket at path and returns it as a
// file for QEMU to inherit.
func listenUnix(path string) (*os.File, error) {
	_ = os.Remove(path)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding %s: %w", path, err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openLog opens the log name on the sandbox's bounded log mount (mounting
// it first if need be) for appending.
func openLog(dir, name string) (*os.File, error) {
	if err := boundfs.Mount(filepath.Join(dir, logDir), boundfs.Logs); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, logDir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", name, err)
	}
	return f, nil
}

// openReadable opens a file QEMU loads through /proc/self/fd: the kernel
// checks the file's own mode then (not its directories'), so it must be
// readable by others. Neither the kernel nor an initramfs is a secret.
func openReadable(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o004 == 0 {
		if err := f.Chmod(fi.Mode().Perm() | 0o444); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// launch starts QEMU for m, in the foreground of a session of its own: it
// is the daemon's child (which reaps it) until the daemon exits, and then
// runs on (a new daemon adopts the sandbox). It runs as the sandbox's uid
// from its first instruction, so its seccomp filter can forbid every uid
// change as well as fork and exec. launch returns once QEMU answers on
// QMP (the machine is set up), after putting it in the sandbox's cgroup.
func (r *Runtime) launch(ctx context.Context, p runtime.StartParams, m *machine) error {
	_ = os.Remove(filepath.Join(p.Dir, pidFile))
	io, err := r.openIO(p.Dir, m)
	if err != nil {
		return err
	}
	args, pass, err := r.qemuArgs(p, m, io)
	if err != nil {
		io.close()
		return err
	}
	defer pass.close()
	stderr, err := openLog(p.Dir, qemuLog)
	if err != nil {
		return err
	}
	defer stderr.Close()
	cred, err := r.credential(m.UID)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.cfg.QEMUPath, args...)
	cmd.Dir = "/"
	cmd.Env = []string{dirEnv + p.Dir}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	cmd.ExtraFiles = pass.files
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting qemu: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pass.close() // QEMU holds its own copies; ours would keep its sockets open after it
	pid := cmd.Process.Pid
	// QEMU inherits the daemon's low OOM score; the whole sandbox is this
	// one process, and the host's OOM killer must take it before the
	// daemon (oomscore). Set before the guest has touched its memory.
	if err := oomscore.Set(pid, oomscore.Above()); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	if err := os.WriteFile(filepath.Join(p.Dir, pidFile), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	if err := cgroups.AddProcess(r.cgroup(p.ID), pid); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	if err := waitQMP(ctx, p.Dir, exited); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	return nil
}

// waitQMP waits until QEMU greets on QMP, failing at once, with its log's
// tail, when it exits.
func waitQMP(ctx context.Context, dir string, exited <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	ready := make(chan error, 1)
	go func() {
		q, err := dialQMP(ctx, filepath.Join(dir, qmpSock))
		if err == nil {
			q.close()
		}
		ready <- err
	}()
	select {
	case err := <-exited:
		cancel()
		<-ready
		return fmt.Errorf("qemu exited during setup (%v): %s", err, qemuLogTail(dir))
	case err := <-ready:
		if err != nil {
			select {
			case xerr := <-exited:
				return fmt.Errorf("qemu exited during setup (%v): %s", xerr, qemuLogTail(dir))
			case <-time.After(100 * time.Millisecond):
			}
			return fmt.Errorf("qemu did not answer on QMP: %w", err)
		}
		return nil
	}
}

// credential is who QEMU runs as: the sandbox's uid (and as many gid), or
// the shared unprivileged user for a machine recorded before per-sandbox
// uids; with the group of /dev/kvm when QEMU needs it and others may not
// use it.
func (r *Runtime) credential(uid int) (*syscall.Credential, error) {
	gid := uid
	if uid == 0 {
		u, err := user.Lookup(qemuUser)
		if err != nil {
			return nil, fmt.Errorf("QEMU's user %s: %w", qemuUser, err)
		}
		if uid, err = strconv.Atoi(u.Uid); err == nil {
			gid, err = strconv.Atoi(u.Gid)
		}
		if err != nil {
			return nil, fmt.Errorf("QEMU's user %s: %w", qemuUser, err)
		}
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	if r.cfg.Accel == "kvm" {
		var st unix.Stat_t
		if err := unix.Stat("/dev/kvm", &st); err == nil && st.Mode&0o006 != 0o006 {
			cred.Groups = append(cred.Groups, st.Gid)
		}
	}
	return cred, nil
}

// qemuLogTail is the last lines QEMU wrote on its stderr, for errors.
func qemuLogTail(dir string) string {
	s := boundfs.TailLines(filepath.Join(dir, logDir, qemuLog), 5, " | ")
	if s == "" {
		return "(no output)"
	}
	return "qemu: " + s
}

// consolePath is the guest's console log: on the bounded log mount, or
// where a sandbox started before it has it.
func consolePath(dir string) string {
	p := filepath.Join(dir, logDir, consoleFile)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Lstat(filepath.Join(dir, consoleFile)); err == nil {
			return filepath.Join(dir, consoleFile)
		}
	}
	return p
}

// RotateLogs keeps the guest's console and QEMU's log within
// boundfs.LogRotateBytes each (runtime.LogRotator).
func (r *Runtime) RotateLogs(ref runtime.Ref) error {
	if err := ref.Check(); err != nil {
		return err
	}
	var errs []error
	for _, p := range []string{consolePath(ref.Dir), filepath.Join(ref.Dir, logDir, qemuLog), filepath.Join(ref.Dir, qemuLog)} {
		if _, err := boundfs.Rotate(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var _ runtime.LogRotator = (*Runtime)(nil)

// hasEnv reports whether environ (NUL-separated) holds kv.
func hasEnv(environ []byte, kv string) bool {
	for _, e := range strings.Split(string(environ), "\x00") {
		if e == kv {
			return true
		}
	}
	return false
}
