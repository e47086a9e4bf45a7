package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"corral/internal/errdefs"
	"corral/internal/runtime"
)

// Files of a sandbox that is, or was, saved.
const (
	checkpointDirName = "checkpoint" // runsc's image of a paused sandbox
	pausedFile        = "paused"     // present while paused
	// relistenFile marks a sandbox whose agent released its socket for a
	// checkpoint: Dial sends it SIGUSR2 until it listens again.
	relistenFile = "relisten"
)

// Bounds of checkpoints and restores.
const (
	checkpointTimeout = 5 * time.Minute
	releaseTimeout    = 5 * time.Second
	relistenEvery     = 250 * time.Millisecond
	// unmarkedNudgeAfter is how long Dial waits for the socket of an
	// unmarked sandbox before it nudges the agent anyway (nudge): far
	// longer than a starting agent takes to listen.
	unmarkedNudgeAfter = 2 * time.Second
)

var (
	_ runtime.Pauser      = (*Runtime)(nil)
	_ runtime.Snapshotter = (*Runtime)(nil)
)

// Pause checkpoints the sandbox into <dir>/checkpoint (its memory,
// processes and private layer) and ends its runsc container, freeing its
// CPU and memory; the directory, network namespace and bundle stay.
//
// The checkpoint leaves the sandbox running, and the container ends only
// once the image is complete and marked by the paused file. A daemon
// killed anywhere in between (the runsc checkpoint it started runs on
// without it) thus finds the sandbox either running, and adopts it, or
// paused with a whole image; never ended with its state in an image no
// one can tell is whole.
func (r *Runtime) Pause(ctx context.Context, ref runtime.Ref) error {
	if err := ref.Check(); err != nil {
		return err
	}
	start := time.Now()
	paused := filepath.Join(ref.Dir, pausedFile)
	// A mark left by a daemon killed between an earlier pause's image
	// and its end (the sandbox was adopted running).
	if err := os.Remove(paused); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	image := filepath.Join(ref.Dir, checkpointDirName)
	if err := r.checkpoint(ctx, ref, image, true); err != nil {
		return fmt.Errorf("pausing %s: %w", ref.ID, err)
	}
	if err := os.WriteFile(paused, nil, 0o600); err != nil {
		return err
	}
	if err := errors.Join(r.halt(ctx, ref, true)...); err != nil {
		return fmt.Errorf("pausing %s: %w", ref.ID, err)
	}
	r.log.Debug("sandbox paused", "sandbox", ref.ID, "op", "pause", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// Resume restores the paused sandbox from its checkpoint: the same
// processes, memory and files, in the same network namespace.
func (r *Runtime) Resume(ctx context.Context, ref runtime.Ref) error {
	if err := ref.Check(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(ref.Dir, pausedFile)); err != nil {
		return fmt.Errorf("resuming %s: not paused: %w", ref.ID, err)
	}
	start := time.Now()
	// The container of a pause whose daemon was killed before it ended it.
	if known, err := r.known(ref.ID); err != nil || known {
		if err := errors.Join(append(r.halt(ctx, ref, true), err)...); err != nil {
			return fmt.Errorf("resuming %s: ending the paused container: %w", ref.ID, err)
		}
	}
	// A sandbox paused by a daemon from before the bounded mounts gets
	// them now; on any other they are there already.
	if err := mountBounded(ref.Dir); err != nil {
		return fmt.Errorf("resuming %s: %w", ref.ID, err)
	}
	// runsc took the namespace's addresses when it first started there.
	if err := putBackNetAddrs(ref.Dir); err != nil {
		return fmt.Errorf("resuming %s: %w", ref.ID, err)
	}
	image := filepath.Join(ref.Dir, checkpointDirName)
	if err := r.create(ctx, ref, filepath.Join(ref.Dir, bundleDirName), image); err != nil {
		_ = errors.Join(r.halt(context.WithoutCancel(ctx), ref, true)...)
		return fmt.Errorf("resuming %s: %w", ref.ID, err)
	}
	for _, f := range []string{pausedFile, checkpointDirName} {
		if err := os.RemoveAll(filepath.Join(ref.Dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	r.log.Debug("sandbox resumed", "sandbox", ref.ID, "op", "resume", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// SaveSnapshot checkpoints the running sandbox into dir, leaving it
// running.
func (r *Runtime) SaveSnapshot(ctx context.Context, ref runtime.Ref, dir string) error {
	if err := ref.Check(); err != nil {
		return err
	}
	if err := r.checkpoint(ctx, ref, dir, true); err != nil {
		return fmt.Errorf("snapshotting %s: %w", ref.ID, err)
	}
	return nil
}

// StartFromSnapshot starts the new sandbox p restored from the checkpoint
// in dir (written by SaveSnapshot from a sandbox of the same image).
func (r *Runtime) StartFromSnapshot(ctx context.Context, p runtime.StartParams, dir string) error {
	if err := r.start(ctx, p, dir); err != nil {
		return fmt.Errorf("starting %s from a snapshot: %w", p.ID, err)
	}
	return nil
}

// restoreCopy restores the prepared sandbox ref from the checkpoint in
// image; its agent listens once Dial nudges it.
func (r *Runtime) restoreCopy(ctx context.Context, ref runtime.Ref, bundle, image string) error {
	if err := os.WriteFile(filepath.Join(ref.Dir, relistenFile), nil, 0o600); err != nil {
		return err
	}
	// The copy's spec differs from the saved one where it must (hostname,
	// cgroup, the agent's nameserver, the network namespace): runsc checks
	// the rest and warns instead of refusing over those.
	return r.create(ctx, ref, bundle, image, "--restore-spec-validation", "warning")
}

// checkpoint waits for the agent to release its socket (the caller ended
// its session) and writes runsc's checkpoint of ref into image, through a
// temporary directory. leaveRunning keeps the sandbox running after it.
func (r *Runtime) checkpoint(ctx context.Context, ref runtime.Ref, image string, leaveRunning bool) error {
	if err := os.WriteFile(filepath.Join(ref.Dir, relistenFile), nil, 0o600); err != nil {
		return err
	}
	if err := waitReleased(ctx, filepath.Join(ref.Dir, chanDirName, agentSocket)); err != nil {
		return err
	}
	tmp := image + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	args := []string{"checkpoint", "--image-path", tmp}
	if leaveRunning {
		args = append(args, "--leave-running")
	}
	_, err := r.runsc(ctx, checkpointTimeout, ref.Dir, append(args, ref.ID)...)
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.RemoveAll(image); err != nil {
		return err
	}
	return os.Rename(tmp, image)
}

// waitReleased waits for the agent's socket file to go.
func waitReleased(ctx context.Context, sock string) error {
	deadline := time.Now().Add(releaseTimeout)
	for {
		if _, err := os.Lstat(sock); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: the agent did not release its socket within %s", errdefs.ErrUnavailable, releaseTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// nudge asks a sandbox's agent that released its socket for a checkpoint
// to listen again (SIGUSR2 to PID 1); it reports whether it was due: when
// the relisten file marks the sandbox, or when unmarked is set.
//
// Unmarked nudges are for an agent whose session a daemon ended before a
// checkpoint and which the daemon was killed before marking: the agent
// releases its socket when the session ends, the runtime marks the
// sandbox only later, and the next daemon would otherwise wait for a
// socket that never comes. SIGUSR2 harms no agent: one that listens
// ignores it (Relisten); a Go program that does not ask for SIGUSR2
// catches and drops it; and before the Go runtime is up PID 1 ignores a
// signal it has no handler for.
func (r *Runtime) nudge(ctx context.Context, ref runtime.Ref, unmarked bool) bool {
	if _, err := os.Stat(filepath.Join(ref.Dir, relistenFile)); err != nil && !unmarked {
		return false
	}
	if _, err := r.runsc(ctx, commandTimeout, ref.Dir, "kill", ref.ID, "USR2"); err != nil {
		r.log.Debug("asking the agent to listen again", "sandbox", ref.ID, "err", err)
	}
	return true
}
