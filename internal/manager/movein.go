package manager

import (
	"context"
	"errors"
	"fmt"
	"os"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/sandbox"
	"corral/internal/telemetry"
)

// MoveIn starts sandbox id, moved here from another node of a cluster,
// as a copy of the memory snapshot ref this node holds (the snapshot's
// spec, named name), and pauses it: it comes up as its user left it,
// under its own id. On failure nothing of it is left here.
func (m *Manager) MoveIn(ctx context.Context, id, ref, name string) (*sandbox.Sandbox, error) {
	if err := ids.CheckSandbox(id); err != nil {
		return nil, err
	}
	if rec, err := m.records.GetSandbox(ctx, id); err == nil && !rec.State.Terminal() {
		return nil, fmt.Errorf("%w: sandbox %s is live here", errdefs.ErrAlreadyExists, id)
	}
	snap, err := m.snaps.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	spec := snap.Spec
	spec.FromSnapshot, spec.Name = snap.ID, name
	st := createStat{source: telemetry.SourceSnapshot}
	if _, err := m.createAs(ctx, spec, &st, id); err != nil {
		return nil, err
	}
	if _, err := m.Pause(ctx, id); err != nil {
		if ferr := m.RemoveMoved(context.WithoutCancel(ctx), id); ferr != nil {
			m.log.WarnContext(ctx, "removing a moved sandbox that did not pause", "sandbox", id, "err", ferr)
		}
		return nil, fmt.Errorf("pausing moved sandbox %s: %w", id, err)
	}
	return m.Get(ctx, id)
}

// RemoveMoved terminates sandbox id and forgets it (record, events,
// entrypoint log): it lives on another node of the cluster now (or a
// move that brought it here was undone). One already gone is no error.
func (m *Manager) RemoveMoved(ctx context.Context, id string) error {
	if err := ids.CheckSandbox(id); err != nil {
		return err
	}
	if _, err := m.Terminate(ctx, id, sandbox.EndTerminated, nil); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	if err := m.records.ForgetEnded(ctx, id); err != nil {
		return err
	}
	if err := os.Remove(m.cfg.logPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.WarnContext(ctx, "removing a moved sandbox's log", "sandbox", id, "err", err)
	}
	return nil
}
