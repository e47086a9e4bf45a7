package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"corral/internal/runtime"
)

// A daemon killed during a pause, a resume or a memory snapshot leaves a
// guest half-way, because QEMU (daemonized) carries on without it: stopped
// for a save whose migration may still be writing, or the agent's port
// stalled after one. The functions here find and finish such states, so
// that the next daemon gets the guest back rather than losing it.

// stoppedForSave are the QEMU run states a save leaves a guest in: stopped
// by "stop", migrating, or migrated.
var stoppedForSave = map[string]bool{"paused": true, "finish-migrate": true, "postmigrate": true}

// runState asks QEMU for the guest's run state ("running", "paused", ...).
func runState(q *qmp) (string, error) {
	raw, err := q.exec("query-status", nil)
	if err != nil {
		return "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", fmt.Errorf("qmp query-status: %w", err)
	}
	return st.Status, nil
}

// guestRuns reports whether the QEMU of a sandbox marked paused runs its
// guest: the resume of a daemon killed after it let the guest run (the
// state file is then stale; restoring it again would undo the guest's
// disk writes since). A QEMU that does not answer counts as not running.
func guestRuns(ctx context.Context, ref runtime.Ref) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	q, err := dialQMP(ctx, filepath.Join(ref.Dir, qmpSock))
	if err != nil {
		return false
	}
	defer q.close()
	st, err := runState(q)
	return err == nil && st == "running"
}

// replugFile marks a guest whose agent port needs replugging: written
// before a memory snapshot stops the guest and before a restored guest
// is let run, removed once the port is new (resetAgentChannel). A daemon
// killed in between (the guest may run again already, its port stalled
// or gone) leaves it for the next daemon's runGuest.
const replugFile = "replug-agent-port"

func markReplug(ref runtime.Ref) error {
	return os.WriteFile(filepath.Join(ref.Dir, replugFile), nil, 0o600)
}

func unmarkReplug(ref runtime.Ref) error {
	if err := os.Remove(filepath.Join(ref.Dir, replugFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func replugMarked(ref runtime.Ref) bool {
	_, err := os.Stat(filepath.Join(ref.Dir, replugFile))
	return err == nil
}

// runGuest, before the daemon talks to a live guest, lets it run again if
// a save the daemon did not finish left it stopped: it cancels a migration
// still under way and continues the guest; and it replugs the agent's
// port when a save or restore was stopped before it did (replugFile: a
// migration stalls the port). A guest that runs loses the paused mark and
// the state file of a resume a daemon was killed in after the guest ran.
func (r *Runtime) runGuest(ctx context.Context, ref runtime.Ref) error {
	if pid, ok := readPid(ref.Dir); !ok || !qemuAlive(pid, ref.Dir) {
		return nil
	}
	q, err := dialQMP(ctx, filepath.Join(ref.Dir, qmpSock))
	if err != nil {
		return err
	}
	defer q.close()
	st, err := runState(q)
	if err != nil {
		return err
	}
	replug := replugMarked(ref)
	switch {
	case st == "running" && !replug:
		return removeStale(ref)
	case st != "running" && !stoppedForSave[st]:
		return nil // not ours to change (shut down, panicked, ...)
	case st != "running":
		r.log.Warn("continuing a guest an unfinished save left stopped", "sandbox", ref.ID, "qemu_state", st)
		if err := settleMigration(ctx, q); err != nil {
			return err
		}
		if _, err := q.exec("cont", nil); err != nil {
			return err
		}
	default:
		r.log.Warn("replugging the agent port an unfinished save or restore left stalled", "sandbox", ref.ID)
	}
	if err := r.resetAgentChannel(q, ref); err != nil {
		return err
	}
	return removeStale(ref)
}

// settleMigration cancels a migration still under way and waits until
// none is.
func settleMigration(ctx context.Context, q *qmp) error {
	if _, err := q.exec("migrate_cancel", nil); err != nil {
		return err
	}
	for {
		raw, err := q.exec("query-migrate", nil)
		if err != nil {
			return err
		}
		var st struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			return err
		}
		switch st.Status {
		case "", "none", "completed", "failed", "cancelled":
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for a migration to end: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// removeStale removes what a pause or resume left in the directory of a
// guest that runs: the paused mark, the state file and its temporary.
func removeStale(ref runtime.Ref) error {
	var errs []error
	for _, f := range []string{pausedFile, stateFile, stateFile + ".tmp"} {
		if err := os.Remove(filepath.Join(ref.Dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
