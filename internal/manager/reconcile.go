package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"corral/internal/agentapi"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// reconcile makes the records and the host agree after a start: every
// sandbox the store says is live is either adopted (it still runs and its
// agent answers) or terminated and cleaned up; anything a runtime runs, or
// any sandbox directory, without a live record is destroyed. No record is
// forgotten.
func (m *Manager) reconcile(ctx context.Context) error {
	recs, err := m.store.ListSandboxes(ctx, true)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, sb := range recs {
		known[sb.ID] = true
		m.reconcileOne(ctx, sb)
	}
	snaps, err := m.store.ListSnapshots(ctx)
	if err != nil {
		return err
	}
	for _, sn := range snaps {
		known[sn.ID] = true // holds an image lease
	}
	m.removeOrphanSnapshots(known)
	m.destroyOrphans(ctx, known)
	return nil
}

// removeOrphanSnapshots removes snapshot directories without a record (a
// snapshot that was being written when the daemon stopped).
func (m *Manager) removeOrphanSnapshots(known map[string]bool) {
	entries, _ := os.ReadDir(m.cfg.snapshotsDir())
	for _, e := range entries {
		if id := e.Name(); !known[id] {
			m.log.Warn("removing an unrecorded snapshot", "snapshot", id)
			if err := os.RemoveAll(filepath.Join(m.cfg.snapshotsDir(), id)); err != nil {
				m.log.Error("removing an unrecorded snapshot", "snapshot", id, "err", err)
			}
		}
	}
}

func (m *Manager) reconcileOne(ctx context.Context, sb *sandbox.Sandbox) {
	rt := m.cfg.Runtimes[sb.Spec.Runtime]
	if rt == nil {
		m.log.Error("sandbox of an unavailable runtime; marking lost", "sandbox", sb.ID, "runtime", sb.Spec.Runtime)
		m.endRecord(ctx, sb, sandbox.EndLost, "runtime "+sb.Spec.Runtime+" unavailable")
		return
	}
	l := newLive(sb, rt)
	m.mu.Lock()
	m.live[sb.ID] = l
	m.mu.Unlock()
	l.op.Lock()
	defer l.op.Unlock()
	if sb.Spec.Tags[poolTag] != "" && sb.State == sandbox.Running {
		// The new daemon fills its own pool.
		m.event(sb.ID, "terminated", "warm pool sandbox of the previous daemon", nil)
		if _, err := m.terminateLocked(l, sandbox.EndTerminated, nil); err != nil {
			m.log.Error("terminating a warm pool sandbox", "sandbox", sb.ID, "err", err)
		}
		return
	}
	reason, err := m.adopt(ctx, l)
	if err == nil {
		m.log.Info("adopted sandbox", "sandbox", sb.ID, "state", sb.State)
		m.event(sb.ID, "adopted", "daemon restarted; sandbox still "+string(sb.State), nil)
		return
	}
	m.log.Warn("sandbox not recoverable after restart", "sandbox", sb.ID, "reason", reason, "err", err)
	m.event(sb.ID, reason, "not recoverable after daemon restart: "+err.Error(), nil)
	if sb.State == sandbox.Creating {
		derr := rt.Destroy(ctx, l.ref)
		if derr == nil {
			derr = m.detachNetwork(ctx, sb.ID)
		}
		if derr == nil {
			m.releaseImage(sb.ID)
		}
		if derr != nil {
			m.log.Error("destroying half-created sandbox", "sandbox", sb.ID, "err", derr)
			return
		}
		m.fail(l, fmt.Errorf("daemon restarted while creating: %w", err))
		return
	}
	if _, err := m.terminateLocked(l, reason, nil); err != nil {
		m.log.Error("terminating unrecoverable sandbox", "sandbox", sb.ID, "err", err)
	}
}

// adopt reconnects to a sandbox that was running before the restart. On
// failure it returns the end reason to record.
func (m *Manager) adopt(ctx context.Context, l *live) (string, error) {
	sb := l.snapshot()
	if sb.State == sandbox.Paused {
		// Stays paused (no agent to reach) until resumed.
		if st, err := l.rt.Status(ctx, l.ref); err != nil || st != runtime.StatePaused {
			return sandbox.EndLost, fmt.Errorf("it was paused, but the runtime reports %q (%v)", st, err)
		}
		return "", nil
	}
	switch {
	case sb.State != sandbox.Running:
		return sandbox.EndLost, fmt.Errorf("it was %s", sb.State)
	case time.Now().After(sb.ExpiresAt()):
		return sandbox.EndTimeout, fmt.Errorf("its lifetime ended at %s", sb.ExpiresAt().Format(time.RFC3339))
	}
	st, err := l.rt.Status(ctx, l.ref)
	if err != nil || st != runtime.StateRunning {
		return sandbox.EndLost, fmt.Errorf("runtime reports %q (%v)", st, err)
	}
	client, err := m.connect(ctx, l)
	if err != nil {
		return sandbox.EndLost, err
	}
	if len(sb.Spec.Entrypoint) > 0 {
		if err := m.reattachEntrypoint(ctx, l, client); err != nil {
			client.Close()
			return sandbox.EndLost, err
		}
	}
	l.mu.Lock()
	l.client = client
	l.mu.Unlock()
	m.watch(l, client)
	return "", nil
}

// reattachEntrypoint follows the entrypoint again; if it ended while the
// daemon was down, Connect replays its end and the sandbox ends normally.
func (m *Manager) reattachEntrypoint(ctx context.Context, l *live, client *agentapi.Client) error {
	stream, err := client.Connect(m.ctx, 0, entrypointTag)
	if err != nil {
		return fmt.Errorf("re-attaching to the entrypoint: %w", err)
	}
	m.followEntrypoint(l, stream)
	return nil
}

// endRecord marks a record terminal without a runtime (its runtime is gone).
func (m *Manager) endRecord(ctx context.Context, sb *sandbox.Sandbox, reason, msg string) {
	sb.State = sandbox.Terminated
	sb.EndReason = reason
	sb.Error = msg
	sb.EndedAt = time.Now().UTC()
	code := sandbox.ExitCodeFor(reason)
	sb.ExitCode = &code
	if err := m.store.PutSandbox(ctx, sb); err != nil {
		m.log.Error("recording lost sandbox", "sandbox", sb.ID, "err", err)
	}
}

// destroyOrphans removes what runtimes run, and sandbox directories that
// exist, without a live record.
func (m *Manager) destroyOrphans(ctx context.Context, known map[string]bool) {
	orphans := map[string]runtime.Runtime{}
	for _, rt := range m.cfg.Runtimes {
		ids, err := rt.List(ctx)
		if err != nil {
			m.log.Error("listing runtime sandboxes", "runtime", rt.Name(), "err", err)
			continue
		}
		for _, id := range ids {
			if !known[id] && sandbox.ValidID(id) {
				orphans[id] = rt
			}
		}
	}
	entries, _ := os.ReadDir(m.cfg.sandboxesDir())
	for _, e := range entries {
		if id := e.Name(); sandbox.ValidID(id) && !known[id] && orphans[id] == nil {
			for _, rt := range m.cfg.Runtimes {
				orphans[id] = rt
				break
			}
		}
	}
	m.destroyOrphanNetworks(ctx, known)
	m.releaseOrphanLeases(known)
	for id, rt := range orphans {
		ref := runtime.Ref{ID: id, Dir: filepath.Join(m.cfg.sandboxesDir(), id)}
		m.log.Warn("destroying orphaned sandbox", "sandbox", id, "runtime", rt.Name())
		if err := rt.Destroy(ctx, ref); err != nil {
			m.log.Error("destroying orphaned sandbox", "sandbox", id, "err", err)
		}
	}
}

// destroyOrphanNetworks detaches the network of every sandbox the network
// layer has state for but the store has no live record of.
func (m *Manager) destroyOrphanNetworks(ctx context.Context, known map[string]bool) {
	if !m.networkEnabled() {
		return
	}
	ids, err := m.cfg.Network.Layer.List()
	if err != nil {
		m.log.Error("listing sandbox networks", "err", err)
		return
	}
	for _, id := range ids {
		if known[id] {
			continue
		}
		m.log.Warn("detaching orphaned sandbox network", "sandbox", id)
		if err := m.detachNetwork(ctx, id); err != nil {
			m.log.Error("detaching orphaned sandbox network", "sandbox", id, "err", err)
		}
	}
}
