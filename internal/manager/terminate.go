package manager

import (
	"context"
	"fmt"
	"time"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// destroyTimeout bounds the runtime's teardown of one sandbox.
const destroyTimeout = 60 * time.Second

// Terminate ends a sandbox for reason, killing everything in it and removing
// every host resource it had. exitCode, if not nil, is what wait reports
// (the entrypoint's); otherwise the reason's code. Terminating a terminal
// sandbox returns its record unchanged.
func (m *Manager) Terminate(ctx context.Context, id, reason string, exitCode *int) (*sandbox.Sandbox, error) {
	if !sandbox.ValidID(id) {
		return nil, fmt.Errorf("%w: sandbox %q", errdefs.ErrNotFound, id)
	}
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	if l == nil {
		return m.store.GetSandbox(ctx, id)
	}
	l.op.Lock()
	defer l.op.Unlock()
	if l.state().Terminal() {
		return l.snapshot(), nil
	}
	return m.terminateLocked(l, reason, exitCode)
}

// terminateLocked does the work of Terminate; the caller holds l.op.
func (m *Manager) terminateLocked(l *live, reason string, exitCode *int) (*sandbox.Sandbox, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), destroyTimeout)
	defer cancel()
	if l.state() != sandbox.Terminating {
		rec, err := l.move(sandbox.Terminating, func(s *sandbox.Sandbox) { s.EndReason = reason })
		if err != nil {
			return nil, err
		}
		if err := m.store.PutSandbox(ctx, rec); err != nil {
			return nil, err
		}
	}
	l.detach()
	err := l.rt.Destroy(ctx, l.ref)
	if err == nil {
		err = m.detachNetwork(ctx, l.ref.ID)
	}
	if err == nil {
		m.releaseImage(l.ref.ID)
	}
	if err != nil {
		// Stay in terminating: the record says cleanup is owed, and the next
		// reconcile retries it.
		m.event(l.ref.ID, "error", "destroying sandbox: "+err.Error(), nil)
		return nil, fmt.Errorf("terminating sandbox %s: %w", l.ref.ID, err)
	}
	code := sandbox.ExitCodeFor(reason)
	if exitCode != nil {
		code = *exitCode
	}
	rec, err := l.move(sandbox.Terminated, func(s *sandbox.Sandbox) {
		s.EndedAt = time.Now().UTC()
		s.EndReason = reason
		s.ExitCode = &code
	})
	if err != nil {
		return nil, err
	}
	if err := m.store.PutSandbox(ctx, rec); err != nil {
		return nil, err
	}
	m.event(l.ref.ID, "terminated", "sandbox terminated", map[string]string{"reason": reason, "exit_code": fmt.Sprint(code)})
	m.log.Info("sandbox terminated", "sandbox", l.ref.ID, "reason", reason, "exit_code", code)
	m.forget(l)
	return rec, nil
}

// Wait blocks until the sandbox is terminal (or ctx ends) and returns its
// exit code and end reason.
func (m *Manager) Wait(ctx context.Context, id string) (int, string, error) {
	if !sandbox.ValidID(id) {
		return 0, "", fmt.Errorf("%w: sandbox %q", errdefs.ErrNotFound, id)
	}
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	if l != nil {
		select {
		case <-l.done:
		case <-ctx.Done():
			return 0, "", fmt.Errorf("%w: waiting for sandbox %s: %v", errdefs.ErrDeadlineExceeded, id, ctx.Err())
		}
	}
	rec, err := m.store.GetSandbox(ctx, id)
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
