package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"corral/internal/cgroups"
	"corral/internal/mountinfo"
	"corral/internal/runtime"
)

// How long Destroy waits for a sandbox's processes to exit after runsc has
// killed them, before it kills them itself, and for the cgroup to empty.
const (
	exitGrace     = 5 * time.Second
	cgroupTimeout = 10 * time.Second
	destroyPoll   = 5 * time.Millisecond
)

// Destroy kills the sandbox and removes every host resource it had: runsc's
// state, the sandbox and gofer processes, the cgroup <CgroupParent>/<id> in
// every hierarchy, anything mounted under ref.Dir, and ref.Dir itself. It
// needs nothing but ref (it works after a daemon restart, after a failed
// Start, and when runsc never heard of the sandbox) and may be called any
// number of times. It returns an error only when something is left behind.
func (r *Runtime) Destroy(ctx context.Context, ref runtime.Ref) error {
	if err := ref.Check(); err != nil {
		return err
	}
	if err := r.destroy(ctx, ref); err != nil {
		return fmt.Errorf("destroying sandbox %s: %w", ref.ID, err)
	}
	return nil
}

func (r *Runtime) destroy(ctx context.Context, ref runtime.Ref) error {
	t0 := time.Now()
	errs := r.halt(ctx, ref, false)
	if err := os.RemoveAll(ref.Dir); err != nil {
		errs = append(errs, fmt.Errorf("removing sandbox directory: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.log.Debug("sandbox destroyed", "sandbox", ref.ID, "op", "destroy", "took", time.Since(t0))
	return nil
}

// halt ends the sandbox's runsc container and removes what it holds on the
// host (processes, cgroup, runsc's state, mounts under ref.Dir), leaving
// ref.Dir's files: Destroy then removes them, Pause keeps them for Resume,
// and with them (keepBounds) the bounded channel and log mounts.
func (r *Runtime) halt(ctx context.Context, ref runtime.Ref, keepBounds bool) []error {
	// Note the processes before runsc forgets them. When runsc's state
	// names the sandbox and gofer processes, everything else of the
	// sandbox is in its cgroup, which cgroups.Remove empties; only a
	// create that stopped half-way (no state, or a partial one) may have
	// left processes elsewhere, which a scan of the host finds. Scanning
	// every time made each Destroy cost time in proportion to the
	// sandboxes on the host.
	procs, complete := r.stateProcs(ref.ID)
	scan := !complete
	if scan {
		procs = append(procs, bundleProcs(filepath.Join(ref.Dir, bundleDirName))...)
	}

	var errs []error
	known, err := r.known(ref.ID)
	errs = append(errs, err)
	if known {
		if _, err := r.runsc(ctx, commandTimeout, "", "kill", "--all", ref.ID, "KILL"); err != nil {
			// Usually "not running"; delete --force below decides.
			r.log.Debug("runsc kill", "sandbox", ref.ID, "op", "destroy", "err", err)
		}
		if _, err := r.runsc(ctx, commandTimeout, "", "delete", "--force", ref.ID); err != nil {
			r.log.Warn("runsc delete failed; cleaning up by hand", "sandbox", ref.ID, "op", "destroy", "err", err)
		}
	}
	reapErr := r.reap(ctx, ref, procs, scan)
	cctx, cancel := context.WithTimeout(ctx, cgroupTimeout)
	cgErr := cgroups.Remove(cctx, r.cgroup(ref.ID))
	cancel()
	errs = append(errs, reapErr, cgErr)
	if reapErr == nil && cgErr == nil {
		// Only once nothing of the sandbox runs may runsc forget it.
		errs = append(errs, r.forgetState(ref.ID))
	}
	var keep []string
	if keepBounds {
		keep = boundedMounts(ref.Dir)
	}
	// runsc mounts in its own namespaces: this catches what a crash left.
	return append(errs, mountinfo.UnmountUnder(ref.Dir, keep...))
}

// reap waits for procs to exit, kills the ones that outlive exitGrace,
// and, when scan, kills anything else still running from the sandbox's
// bundle.
func (r *Runtime) reap(ctx context.Context, ref runtime.Ref, procs []proc, scan bool) error {
	ctx, cancel := context.WithTimeout(ctx, exitGrace)
	defer cancel()
	left := waitGone(ctx, procs)
	if len(left) > 0 {
		r.log.Warn("sandbox processes outlived runsc; killing them", "sandbox", ref.ID, "op", "destroy", "pids", pidsOf(left))
	}
	if scan {
		left = append(left, bundleProcs(filepath.Join(ref.Dir, bundleDirName))...)
	}
	for _, p := range left {
		p.kill()
	}
	kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), exitGrace)
	defer kcancel()
	if left = waitGone(kctx, left); len(left) > 0 {
		return fmt.Errorf("processes %v survived SIGKILL", pidsOf(left))
	}
	return nil
}

// waitGone polls until every process in procs has exited or ctx is done,
// and returns those still alive.
func waitGone(ctx context.Context, procs []proc) []proc {
	for {
		var alive []proc
		for _, p := range procs {
			if p.alive() {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return alive
		case <-time.After(destroyPoll):
		}
		procs = alive
	}
}

// forgetState removes runsc's files for id if runsc delete left them (a
// crashed sandbox, or a create killed half-way, which leaves a lock file):
// by now its processes are gone.
func (r *Runtime) forgetState(id string) error {
	files, err := r.stateFiles(id)
	if err != nil {
		return err
	}
	// The sandbox's control socket, named by runsc after the sandbox id.
	files = append(files, filepath.Join(r.cfg.Root, "runsc-"+id+".sock"))
	var errs []error
	for _, f := range files {
		err := os.Remove(f)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			errs = append(errs, fmt.Errorf("removing runsc state: %w", err))
		case strings.HasSuffix(f, ".state"):
			r.log.Warn("removed runsc state by hand", "sandbox", id, "op", "destroy", "file", f)
		default:
			r.log.Debug("removed runsc leftover", "sandbox", id, "op", "destroy", "file", f)
		}
	}
	return errors.Join(errs...)
}
