package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"corral/internal/runtime"
)

// readPid returns QEMU's pid from dir's pid file.
func readPid(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// qemuAlive reports whether pid is a live QEMU of the sandbox in dir (its
// environment names the directory, or, for one a daemon started
// daemonized before, its command line names the directory's socket), so a
// recycled pid is never mistaken for it.
func qemuAlive(pid int, dir string) bool {
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	if !hasEnv(environ, dirEnv+dir) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cmdline, []byte(filepath.Join(dir, agentSock))) {
			return false
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie (state Z after the command's closing parenthesis) is gone.
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// Dial connects to the guest agent's channel (failing at once once QEMU
// has exited), first letting the guest run
// if a daemon killed during a pause or a memory snapshot left it stopped
// (runGuest).
func (r *Runtime) Dial(ctx context.Context, ref runtime.Ref) (net.Conn, error) {
	if err := ref.Check(); err != nil {
		return nil, err
	}
	if err := r.runGuest(ctx, ref); err != nil {
		// The handshake that follows tells whether the guest answers.
		r.log.Warn("letting a stopped guest run", "sandbox", ref.ID, "err", err)
	}
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", filepath.Join(ref.Dir, agentSock))
		if err == nil {
			return conn, nil
		}
		// A QEMU that exited (a guest that panicked or powered off) will
		// never listen again: say so now, not at ctx's end.
		if pid, ok := readPid(ref.Dir); ok && !qemuAlive(pid, ref.Dir) {
			return nil, fmt.Errorf("dialing the agent of %s: the vm is no longer running: %w", ref.ID, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dialing the agent of %s: %w", ref.ID, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Status reports whether the sandbox's QEMU runs, or whether it is paused
// (the paused mark, written once the saved state is whole). Both at once
// is a pause or a resume whose daemon was killed midway: paused, unless
// the guest already runs again.
func (r *Runtime) Status(ctx context.Context, ref runtime.Ref) (runtime.State, error) {
	if err := ref.Check(); err != nil {
		return "", err
	}
	if _, err := os.Stat(r.indexPath(ref.ID)); errors.Is(err, fs.ErrNotExist) {
		return runtime.StateAbsent, nil
	}
	pid, ok := readPid(ref.Dir)
	alive := ok && qemuAlive(pid, ref.Dir)
	_, err := os.Stat(filepath.Join(ref.Dir, pausedFile))
	switch marked := err == nil; {
	case alive && marked && !guestRuns(ctx, ref):
		return runtime.StatePaused, nil
	case alive:
		return runtime.StateRunning, nil
	case marked:
		return runtime.StatePaused, nil
	}
	return runtime.StateStopped, nil
}

// List returns the ids of every sandbox this runtime has started and not
// destroyed.
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(r.cfg.StateDir, "sandboxes"))
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(ents))
	for _, e := range ents {
		ids = append(ids, e.Name())
	}
	return ids, nil
}
