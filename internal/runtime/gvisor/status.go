package gvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
	"corral/internal/runtime"
)

// dialRetry is how often Dial retries while the agent is not listening yet:
// a new sandbox's agent is up a few milliseconds after runsc returns, and
// each retry is one failed open(2), so short costs nothing and saves a
// create up to the interval.
const dialRetry = time.Millisecond

// Dial connects to the agent's unix socket <dir>/chan/agent.sock, retrying
// until the agent listens or ctx is done. Errors wrap errdefs.ErrUnavailable.
//
// The channel directory is writable by the guest, so the socket is opened
// with O_PATH|O_NOFOLLOW, checked to be a socket, and connected through
// /proc/self/fd: a guest cannot point the daemon at another host socket with
// a symlink, and a long sandbox path does not hit the 108-byte sun_path limit.
func (r *Runtime) Dial(ctx context.Context, ref runtime.Ref) (net.Conn, error) {
	if err := ref.Check(); err != nil {
		return nil, err
	}
	path := filepath.Join(ref.Dir, chanDirName, agentSocket)
	var lastNudge time.Time
	start := time.Now()
	for {
		conn, err := dialNoFollow(ctx, path)
		if err == nil {
			if !lastNudge.IsZero() {
				_ = os.Remove(filepath.Join(ref.Dir, relistenFile))
			}
			return conn, nil
		}
		if time.Since(lastNudge) >= relistenEvery && r.nudge(ctx, ref, time.Since(start) >= unmarkedNudgeAfter) {
			lastNudge = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dialing agent of sandbox %s: %w: %w", ref.ID, errdefs.ErrUnavailable, withCtxErr(ctx, err))
		case <-time.After(dialRetry):
		}
	}
}

// dialNoFollow connects to the unix socket at path without following a
// symlink in its last element. The connection knows the socket file it
// came through (chanConn).
func dialNoFollow(ctx context.Context, path string) (net.Conn, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%s is not a socket", path)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return nil, err
	}
	return identify(conn, path, &st), nil
}

// ociState is the part of `runsc state` output this package reads.
type ociState struct {
	ID     string `json:"id"`
	Pid    int    `json:"pid"`
	Status string `json:"status"`
}

// Status asks runsc about ref: running (or paused) with a live sandbox
// process is StateRunning, created or stopped is StateStopped, and no runsc
// state at all is StateAbsent; but not running with the paused file (its
// checkpoint complete) is StatePaused, whether runsc still knows the
// container (a pause or resume whose daemon was killed midway) or not.
func (r *Runtime) Status(ctx context.Context, ref runtime.Ref) (runtime.State, error) {
	if err := ref.Check(); err != nil {
		return "", err
	}
	if ok, err := r.known(ref.ID); err != nil {
		return "", fmt.Errorf("status of sandbox %s: %w", ref.ID, err)
	} else if !ok {
		if _, err := os.Stat(filepath.Join(ref.Dir, pausedFile)); err == nil {
			return runtime.StatePaused, nil
		}
		return runtime.StateAbsent, nil
	}
	out, err := r.runsc(ctx, commandTimeout, "", "state", ref.ID)
	if err != nil {
		// Deleted between the check and the command?
		if ok, kerr := r.known(ref.ID); kerr == nil && !ok {
			return runtime.StateAbsent, nil
		}
		return "", fmt.Errorf("status of sandbox %s: %w", ref.ID, err)
	}
	var st ociState
	if err := json.Unmarshal(out, &st); err != nil {
		return "", fmt.Errorf("status of sandbox %s: decoding runsc state: %w", ref.ID, err)
	}
	switch st.Status {
	case "running", "paused":
		// runsc tests the sandbox with kill(pid, 0), which a zombie passes:
		// a sandbox the host OOM killer ended reads as running until init
		// reaps it.
		if _, ok := lookupProc(st.Pid); ok {
			return runtime.StateRunning, nil
		}
	case "created", "stopped", "creating":
	default:
		return "", fmt.Errorf("status of sandbox %s: runsc reports unknown status %q", ref.ID, st.Status)
	}
	if _, err := os.Stat(filepath.Join(ref.Dir, pausedFile)); err == nil {
		return runtime.StatePaused, nil
	}
	return runtime.StateStopped, nil
}

// List returns the id of every container under runsc's root.
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	out, err := r.runsc(ctx, commandTimeout, "", "list", "--format", "json")
	if err != nil {
		return nil, fmt.Errorf("listing gvisor sandboxes: %w", err)
	}
	var states []ociState
	if err := json.Unmarshal(out, &states); err != nil {
		return nil, fmt.Errorf("listing gvisor sandboxes: decoding runsc list: %w", err)
	}
	ids := make([]string, 0, len(states))
	for _, s := range states {
		ids = append(ids, s.ID)
	}
	return ids, nil
}
