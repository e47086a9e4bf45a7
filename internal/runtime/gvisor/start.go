package gvisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/cleanup"
	"corral/internal/errdefs"
	"corral/internal/runtime"
)

// Start writes the sandbox's bundle, creates it with runsc and starts PID 1
// (the agent). On any failure it removes everything it made, sandbox
// directory included, and returns the error.
func (r *Runtime) Start(ctx context.Context, p runtime.StartParams) error {
	if err := r.start(ctx, p, ""); err != nil {
		return fmt.Errorf("starting sandbox %s: %w", p.ID, err)
	}
	return nil
}

// start makes the sandbox p and runs it: created and started cold, or,
// when image is not "", restored from the checkpoint there.
func (r *Runtime) start(ctx context.Context, p runtime.StartParams, image string) error {
	t0 := time.Now()
	step := runtime.Steps(p.Trace)
	if err := r.checkNew(p); err != nil {
		return err
	}
	c := cleanup.Make(ctx)
	defer c.Clean()
	c.Add(r.rollback(p.Ref))
	bundle, err := r.prepare(p)
	if err != nil {
		return err
	}
	step("bundle")
	if image != "" {
		if err := r.restoreCopy(ctx, p.Ref, bundle, image); err != nil {
			return err
		}
		step("restore")
		c.Release()
		r.log.Debug("sandbox restored", "sandbox", p.ID, "op", "start", "total", time.Since(t0))
		return nil
	}
	// One runsc process creates and starts the sandbox (run --detach):
	// nothing needs doing between the two, and a second runsc start
	// costs a process and a state reload.
	err = r.create(ctx, p.Ref, bundle, "")
	if errors.Is(err, errHung) && ctx.Err() == nil {
		// Once in thousands of starts on a loaded host, runsc run never
		// returned (seen in a CI soak). What it made is removed as a
		// pause removes it (the directory stays), and it runs again.
		r.log.Warn("runsc run hung; starting again", "sandbox", p.ID, "op", "start")
		if err := errors.Join(r.halt(ctx, p.Ref, true)...); err != nil {
			return fmt.Errorf("removing the hung start: %w", err)
		}
		err = r.create(ctx, p.Ref, bundle, "")
	}
	if err != nil {
		return err
	}
	step("run")
	c.Release()
	r.log.Debug("sandbox started", "sandbox", p.ID, "op", "start", "total", time.Since(t0))
	return nil
}

// rollback returns the undo of a failed start: Destroy removes all that was
// made (the runsc container if create got that far, its processes and
// cgroup, mounts and the directory).
func (r *Runtime) rollback(ref runtime.Ref) func(context.Context) {
	return func(ctx context.Context) {
		if err := r.Destroy(ctx, ref); err != nil {
			r.log.Error("rolling back failed start", "sandbox", ref.ID, "op", "start", "err", err)
		}
	}
}

// prepare makes the sandbox directory (bundle, upper, the bounded chan
// and log mounts, the network mode) and returns the bundle's path.
func (r *Runtime) prepare(p runtime.StartParams) (string, error) {
	bundle := filepath.Join(p.Dir, bundleDirName)
	for _, d := range []string{bundle, filepath.Join(p.Dir, upperDirName)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("creating sandbox directory: %w", err)
		}
	}
	if err := mountBounded(p.Dir); err != nil {
		return "", err
	}
	if err := writeSpec(bundle, buildSpec(p, r.cgroup(p.ID))); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(p.Dir, networkFile), []byte(networkFlag(p.NetnsPath)), 0o600); err != nil {
		return "", fmt.Errorf("recording network mode: %w", err)
	}
	if err := keepNetAddrs(p.Dir, p.NetnsPath); err != nil {
		return "", err
	}
	overlay := "root:dir=" + filepath.Join(p.Dir, upperDirName)
	if p.Resources.DiskMB > 0 {
		overlay += fmt.Sprintf(",size=%dM", p.Resources.DiskMB)
	}
	if err := os.WriteFile(filepath.Join(p.Dir, overlayFile), []byte(overlay), 0o600); err != nil {
		return "", fmt.Errorf("recording the overlay: %w", err)
	}
	return bundle, nil
}

// checkNew validates p and refuses a sandbox runsc or the directory
// already has.
func (r *Runtime) checkNew(p runtime.StartParams) error {
	if err := checkStartParams(p); err != nil {
		return err
	}
	if ok, err := r.known(p.ID); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%w: runsc already has a container %s", errdefs.ErrAlreadyExists, p.ID)
	}
	if _, err := os.Stat(filepath.Join(p.Dir, bundleDirName)); err == nil {
		return fmt.Errorf("%w: %s holds a bundle already", errdefs.ErrAlreadyExists, p.Dir)
	}
	return nil
}

// checkStartParams validates what Start needs from p.
func checkStartParams(p runtime.StartParams) error {
	if err := p.Ref.Check(); err != nil {
		return err
	}
	if err := checkRootFS(p.RootFS); err != nil {
		return err
	}
	if fi, err := os.Stat(p.AgentBinary); err != nil || !fi.Mode().IsRegular() {
		return errdefs.Invalid("agent binary", "%q is not a regular file", p.AgentBinary)
	}
	return nil
}

// create runs `runsc run --detach` (created and started), or `runsc
// restore` of the checkpoint in image when it is not "" (the restored
// sandbox runs at once). Its stdout
// and stderr, which the sandbox inherits as PID 1's, go to console.log;
// stdin is /dev/null. It runs in a session of its own so that the sandbox
// and gofer it leaves behind do not get the daemon's terminal signals.
func (r *Runtime) create(ctx context.Context, ref runtime.Ref, bundle string, image string, extra ...string) error {
	// O_APPEND: the daemon truncates the log when it rotates it
	// (RotateLogs), and every write must then land at its new end.
	console, err := os.OpenFile(filepath.Join(ref.Dir, consoleLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("opening console log: %w", err)
	}
	defer console.Close()
	offset, _ := console.Seek(0, io.SeekEnd)

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, r.startTimeout)
	defer cancel()
	hung := func() bool { return ctx.Err() != nil && parent.Err() == nil }
	// The private layer is a file under upper/ that grows as the guest
	// writes; size= bounds it so a sandbox cannot fill the host's disk.
	overlay, err := os.ReadFile(filepath.Join(ref.Dir, overlayFile))
	if errors.Is(err, fs.ErrNotExist) {
		// A sandbox started before the file was recorded: no size limit.
		overlay, err = []byte("root:dir="+filepath.Join(ref.Dir, upperDirName)), nil
	}
	if err != nil {
		return fmt.Errorf("reading the overlay: %w", err)
	}
	args := append([]string{"--overlay2", string(overlay)}, extra...)
	verb := "run"
	if image != "" {
		verb = "restore"
		args = append(args, "restore", "--detach", "--image-path", image)
	} else {
		args = append(args, "run", "--detach")
	}
	cmd := r.command(ctx, ref.Dir, append(args, "--bundle", bundle, ref.ID)...)
	cmd.Stdout, cmd.Stderr = console, console
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Hung, runsc says where it waited: on SIGQUIT Go's runtime writes
	// every goroutine's stack to its stderr (console.log) and exits;
	// WaitDelay kills it if it does not. A caller that gave up kills it.
	cmd.Cancel = func() error {
		if hung() {
			return cmd.Process.Signal(unix.SIGQUIT)
		}
		return cmd.Process.Kill()
	}
	if err := cmd.Run(); err != nil {
		if hung() {
			r.log.Warn("runsc hung", "sandbox", ref.ID, "op", "start", "verb", verb, "after", r.startTimeout,
				"stack", runscStack(ref.Dir, offset))
			return fmt.Errorf("runsc %s: %w after %s", verb, errHung, r.startTimeout)
		}
		if tail := consoleTail(ref.Dir, offset); tail != "" {
			return fmt.Errorf("runsc %s: %s: %w", verb, tail, withCtxErr(ctx, err))
		}
		return fmt.Errorf("runsc %s: %w", verb, withCtxErr(ctx, err))
	}
	if err := r.favourStubsForOOM(ref.ID); err != nil {
		// The sandbox runs; a host OOM kill may then end all of it.
		r.log.Warn("raising the OOM score of the sandbox's guest processes", "sandbox", ref.ID, "err", err)
	}
	return nil
}

// errHung is a runsc command that did not finish within its time.
var errHung = errors.New("no answer")

// runscStack returns the start of the goroutine dump a SIGQUIT made runsc
// write to console.log after offset: its main goroutine, where it waited
// (at most 4 KiB).
func runscStack(dir string, offset int64) string {
	f, err := openConsoleAt(dir, offset)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	if i := bytes.Index(b, []byte("goroutine 1 [")); i >= 0 {
		b = b[i:]
	}
	if j := bytes.Index(b, []byte("\n\ngoroutine ")); j >= 0 {
		b = b[:j]
	}
	return string(b[:min(len(b), 4<<10)])
}

// openConsoleAt opens the sandbox's console.log for reading from offset
// (its start when offset is not positive).
func openConsoleAt(dir string, offset int64) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, consoleLog), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// consoleTail returns the last lines console.log received after offset
// (the file's last lines when offset is negative), or "".
func consoleTail(dir string, offset int64) string {
	const max = 8 << 10
	if fi, err := os.Lstat(filepath.Join(dir, consoleLog)); err == nil && fi.Size()-max > offset {
		offset = fi.Size() - max
	}
	f, err := openConsoleAt(dir, offset)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, max))
	return lastLines(b, 5)
}

// networkFlag is runsc's --network: "sandbox" (gVisor's netstack on the
// interfaces of the namespace the spec names) when the network layer
// prepared a namespace, else "none" (loopback only). Every runsc command
// for the sandbox reads it (run, exec, checkpoint, restore), so it is recorded
// in the sandbox directory and every command for the sandbox passes it.
func networkFlag(netns string) string {
	if netns != "" {
		return "sandbox"
	}
	return "none"
}
