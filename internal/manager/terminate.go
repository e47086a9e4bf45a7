package manager

import (
	"context"
	"fmt"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/manager/handle"
	"corral/internal/sandbox"
)

// Terminate ends a sandbox for reason, killing everything in it and removing
// every host resource it had. exitCode, if not nil, is what wait reports
// (the entrypoint's); otherwise the reason's code. Terminating a terminal
// sandbox returns its record unchanged.
func (m *Manager) Terminate(ctx context.Context, id, reason string, exitCode *int) (*sandbox.Sandbox, error) {
	h, ended, err := m.lockLive(ctx, id)
	if h == nil {
		return ended, err
	}
	defer h.Unlock()
	m.noteEnder(ctx, h.ID())
	return m.terminateLocked(h, reason, exitCode)
}

// lockLive returns sandbox id's handle, locked, while it is not terminal;
// otherwise (an ended or unknown sandbox) its record or the error.
func (m *Manager) lockLive(ctx context.Context, id string) (*handle.Handle, *sandbox.Sandbox, error) {
	if !ids.Sandbox(id) {
		return nil, nil, fmt.Errorf("%w: sandbox %q", errdefs.ErrNotFound, id)
	}
	h := m.lookup(id)
	if h == nil {
		rec, err := m.records.GetSandbox(ctx, id)
		return nil, rec, err
	}
	h.Lock()
	if h.State().Terminal() {
		h.Unlock()
		return nil, h.Record(), nil
	}
	return h, nil, nil
}

// TerminateNoWait is Terminate that returns as soon as the sandbox is
// terminating (persisted, so a daemon crash meanwhile leaves the cleanup
// owed and reconcile finishes it): the teardown goes on in the background,
// and Wait or Get tell when it is terminated. For callers that do not need
// to wait for the host to be clean (corral run, once its command ended).
func (m *Manager) TerminateNoWait(ctx context.Context, id, reason string) (*sandbox.Sandbox, error) {
	h, ended, err := m.lockLive(ctx, id)
	if h == nil {
		return ended, err
	}
	m.noteEnder(ctx, h.ID())
	rec, err := h.BeginTerminate(reason)
	if err != nil {
		h.Unlock()
		return nil, err
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer h.Unlock()
		if _, err := h.FinishTerminate(reason, nil); err != nil {
			m.log.ErrorContext(ctx, "terminating sandbox", "sandbox", id, "reason", reason, "err", err)
			return
		}
		m.forget(h)
	}()
	return rec, nil
}

// terminateLocked is Terminate for a caller that holds h's lock.
func (m *Manager) terminateLocked(h *handle.Handle, reason string, exitCode *int) (*sandbox.Sandbox, error) {
	rec, err := h.Terminate(reason, exitCode)
	if err != nil {
		return nil, err
	}
	m.forget(h)
	return rec, nil
}

// Wait blocks until the sandbox is terminal (or ctx ends) and returns its
// exit code and end reason.
func (m *Manager) Wait(ctx context.Context, id string) (int, string, error) {
	if !ids.Sandbox(id) {
		return 0, "", fmt.Errorf("%w: sandbox %q", errdefs.ErrNotFound, id)
	}
	if h := m.lookup(id); h != nil {
		select {
		case <-h.Done():
		case <-ctx.Done():
			return 0, "", fmt.Errorf("%w: waiting for sandbox %s: %v", errdefs.ErrDeadlineExceeded, id, ctx.Err())
		}
	}
	rec, err := m.records.GetSandbox(ctx, id)
	if err != nil {
		return 0, "", err
	}
	if !rec.State.Terminal() {
		return 0, "", fmt.Errorf("%w: sandbox %s is %s", errdefs.ErrUnavailable, id, rec.State)
	}
	code := sandbox.ExitCodeFor(rec.EndReason)
	if rec.ExitCode != nil {
		code = *rec.ExitCode
	}
	return code, rec.EndReason, nil
}

// Done returns a channel closed when the sandbox is terminal (already closed
// if it is).
func (m *Manager) Done(id string) <-chan struct{} {
	if h := m.lookup(id); h != nil {
		return h.Done()
	}
	c := make(chan struct{})
	close(c)
	return c
}

// terminateAsync ends a sandbox from a background watcher.
func (m *Manager) terminateAsync(id, reason string, exitCode *int) {
	if m.ctx.Err() != nil {
		return // the daemon is stopping; the next one reconciles
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if _, err := m.Terminate(m.ctx, id, reason, exitCode); err != nil {
			m.log.Error("terminating sandbox", "sandbox", id, "reason", reason, "err", err)
		}
	}()
}
