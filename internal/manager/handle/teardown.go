package handle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"corral/internal/sandbox"
)

// TeardownTimeout bounds one teardown (the runtime's destroy, the network,
// the image lease).
const TeardownTimeout = 60 * time.Second

// Teardown removes every host resource the sandbox has or may have: the
// agent connection, everything its runtime made (processes, cgroup,
// mounts, directory), its network namespace, devices and rules, and its
// image lease. Each step works from the id alone and is idempotent, so the
// same sequence undoes a create that got any way along, ends a running
// sandbox, and cleans up after a crash or a restart, for a sandbox with a
// record or an orphan without one. The record is not touched.
func (h *Handle) Teardown(ctx context.Context) error {
	if h.host.Settle != nil {
		h.host.Settle(ctx, h)
	}
	if c := h.SetAgent(nil); c != nil {
		c.Close()
	}
	if err := h.rt.Destroy(ctx, h.ref); err != nil {
		return fmt.Errorf("destroying the %s sandbox: %w", h.rt.Name(), err)
	}
	if n := h.host.Network; n != nil {
		if f := h.host.ForgetDNS; f != nil {
			f(h.ref.ID)
		}
		if err := n.Detach(ctx, h.ref.ID); err != nil {
			return fmt.Errorf("detaching the network: %w", err)
		}
	}
	if im := h.host.Images; im != nil {
		if err := im.Release(h.ref.ID); err != nil {
			return fmt.Errorf("releasing the image lease: %w", err)
		}
	}
	return nil
}

// teardownContext is a teardown's context: detached from the caller's
// cancellation (a cancelled request still cleans up), bounded.
func (h *Handle) teardownContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(h.host.Lifetime), TeardownTimeout)
}

// Terminate ends the sandbox for reason: terminating is persisted first
// (so a crash midway leaves the cleanup owed in the record, and reconcile
// finishes it), the watchers stop, Teardown runs, and terminated is
// persisted with the exit code: exitCode if not nil (the entrypoint's),
// else the reason's. If the teardown fails the record stays terminating
// and the error is returned. The caller holds Lock and, on success, drops
// the handle from its index.
func (h *Handle) Terminate(reason string, exitCode *int) (*sandbox.Sandbox, error) {
	if _, err := h.BeginTerminate(reason); err != nil {
		return nil, err
	}
	return h.FinishTerminate(reason, exitCode)
}

// BeginTerminate is Terminate's first half: terminating is persisted (if
// the sandbox is not terminating already) and the watchers stop. The
// caller holds Lock and calls FinishTerminate next, in any goroutine.
func (h *Handle) BeginTerminate(reason string) (*sandbox.Sandbox, error) {
	ctx, cancel := h.teardownContext()
	defer cancel()
	rec := h.Record()
	if rec.State != sandbox.Terminating {
		h.mu.Lock()
		detail := h.endDetail
		h.mu.Unlock()
		ch := Change{To: sandbox.Terminating, Edit: func(s *sandbox.Sandbox) {
			s.EndReason = reason
			if s.Error == "" {
				s.Error = detail
			}
		}}
		var err error
		if rec, err = h.Apply(ctx, ch); err != nil {
			return nil, err
		}
	}
	h.Detach()
	return rec, nil
}

// FinishTerminate is Terminate's second half: the teardown, then
// terminated.
func (h *Handle) FinishTerminate(reason string, exitCode *int) (*sandbox.Sandbox, error) {
	ctx, cancel := h.teardownContext()
	defer cancel()
	if err := h.Teardown(ctx); err != nil {
		h.Milestone("error", "destroying sandbox: "+err.Error(), nil)
		return nil, fmt.Errorf("terminating sandbox %s: %w", h.ref.ID, err)
	}
	code := sandbox.ExitCodeFor(reason)
	if exitCode != nil {
		code = *exitCode
	}
	rec, err := h.Apply(ctx, Change{
		To: sandbox.Terminated,
		Edit: func(s *sandbox.Sandbox) {
			s.EndedAt = time.Now().UTC()
			s.EndReason = reason
			s.ExitCode = &code
		},
		Event: &Event{Kind: "terminated", Message: "sandbox terminated",
			Fields: map[string]string{"reason": reason, "exit_code": fmt.Sprint(code)}},
	})
	if err != nil {
		return nil, err
	}
	h.host.Log.Info("sandbox terminated", "sandbox", h.ref.ID, "reason", reason, "exit_code", code)
	h.finish()
	return rec, nil
}

// Fail ends a sandbox whose create failed with cause: Teardown undoes
// every step the create got through (this is the create's rollback), then
// the record becomes failed. If the teardown itself fails the record stays
// creating, for reconcile to finish after the next start. The caller holds
// Lock and drops the handle from its index.
func (h *Handle) Fail(cause error) {
	ctx, cancel := h.teardownContext()
	defer cancel()
	h.Detach()
	defer h.finish()
	if err := h.Teardown(ctx); err != nil {
		h.host.Log.Error("rolling back a failed create", "sandbox", h.ref.ID, "err", err)
		h.Milestone("error", "rolling back: "+err.Error(), nil)
		return
	}
	_, err := h.Apply(ctx, Change{
		To: sandbox.Failed,
		Edit: func(s *sandbox.Sandbox) {
			s.EndedAt = time.Now().UTC()
			s.EndReason = sandbox.EndFailed
			s.Error = cause.Error()
			code := sandbox.ExitCodeFor(sandbox.EndFailed)
			s.ExitCode = &code
		},
		Event: &Event{Kind: "failed", Message: cause.Error()},
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		h.host.Log.Error("recording a failed sandbox", "sandbox", h.ref.ID, "err", err)
	}
}

// Lost ends the record of a sandbox whose runtime is gone from this
// daemon (nothing can be torn down by it): terminated for reason, with
// msg as its error. The caller holds Lock.
func (h *Handle) Lost(ctx context.Context, reason, msg string) {
	defer h.finish()
	code := sandbox.ExitCodeFor(reason)
	_, err := h.Apply(ctx, Change{To: sandbox.Terminating})
	if err == nil {
		_, err = h.Apply(ctx, Change{To: sandbox.Terminated, Edit: func(s *sandbox.Sandbox) {
			s.EndReason, s.Error, s.EndedAt, s.ExitCode = reason, msg, time.Now().UTC(), &code
		}})
	}
	if err != nil {
		h.host.Log.Error("recording a lost sandbox", "sandbox", h.ref.ID, "err", err)
	}
}
