package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"corral/internal/agentapi"
	"corral/internal/ids"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// reconcileWorkers bounds the sandboxes reconciled at once after a start.
const reconcileWorkers = 8

// reconcile makes the records and the host agree after a start: every
// sandbox the records say is live is either adopted (it still runs and its
// agent answers) or torn down and ended; anything a runtime runs, any
// sandbox directory, network or image lease without a live record is torn
// down. No record is forgotten.
func (m *Manager) reconcile(ctx context.Context) error {
	recs, err := m.records.ListSandboxes(ctx, true)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, sb := range recs {
		known[sb.ID] = true
	}
	// Each sandbox is reconciled under its own lock and independently of
	// the others (a reconnect, an agent handshake, or a teardown), so a few
	// at a time: a daemon restarted over 500 sandboxes took 20 s one by
	// one, its API down meanwhile.
	work := make(chan *sandbox.Sandbox)
	var wg sync.WaitGroup
	for range min(reconcileWorkers, len(recs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sb := range work {
				m.reconcileOne(ctx, sb)
			}
		}()
	}
	for _, sb := range recs {
		work <- sb
	}
	close(work)
	wg.Wait()
	snaps, err := m.records.ListSnapshots(ctx)
	if err != nil {
		return err
	}
	m.endUnfinishedForks(ctx, snaps)
	for _, sn := range snaps {
		known[sn.ID] = true // holds an image lease
	}
	m.removeOrphanSnapshots(known)
	m.tearDownOrphans(ctx, known)
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
	h := handle.New(sb, rt, m.host)
	h.Lock()
	defer h.Unlock()
	if rt == nil {
		m.log.Error("sandbox of an unavailable runtime; marking lost", "sandbox", sb.ID, "runtime", sb.Spec.Runtime)
		h.Lost(ctx, sandbox.EndLost, "runtime "+sb.Spec.Runtime+" unavailable")
		return
	}
	m.mu.Lock()
	m.handles[sb.ID] = h
	m.mu.Unlock()
	if why := endsWithDaemon(sb); why != "" && sb.State == sandbox.Running {
		h.Milestone("terminated", why, nil)
		if _, err := m.terminateLocked(h, sandbox.EndTerminated, nil); err != nil {
			m.log.Error("terminating a sandbox of the previous daemon", "sandbox", sb.ID, "err", err)
		}
		return
	}
	reason, err := m.adopt(ctx, h)
	if err == nil {
		m.log.Info("adopted sandbox", "sandbox", sb.ID, "state", h.State())
		h.Milestone("adopted", "daemon restarted; sandbox still "+string(h.State()), nil)
		return
	}
	m.log.Warn("sandbox not recoverable after restart", "sandbox", sb.ID, "reason", reason, "err", err)
	h.Milestone(reason, "not recoverable after daemon restart: "+err.Error(), nil)
	if sb.State == sandbox.Creating {
		h.Fail(fmt.Errorf("daemon restarted while creating: %w", err))
		m.forget(h)
		return
	}
	if _, err := m.terminateLocked(h, reason, nil); err != nil {
		m.log.Error("terminating unrecoverable sandbox", "sandbox", sb.ID, "err", err)
	}
}

// endsWithDaemon says why a sandbox the daemon ran for itself does not
// outlive it: a warm pool's (the new daemon fills its own pool) or an
// image build's (the build ended with the daemon that ran it, and nobody
// else knows the sandbox); "" for any other.
func endsWithDaemon(sb *sandbox.Sandbox) string {
	switch {
	case sb.Spec.Tags[poolTag] != "":
		return "warm pool sandbox of the previous daemon"
	case sb.Spec.Tags[BuildStepTag] != "":
		return "build sandbox of the previous daemon: its build ended with it"
	}
	return ""
}

// adopt reconnects to a sandbox that was running (or paused) before the
// restart. On failure it returns the end reason to record.
func (m *Manager) adopt(ctx context.Context, h *handle.Handle) (string, error) {
	sb := h.Record()
	if sb.State == sandbox.Paused && sb.PauseKind == sandbox.PauseFilesystem {
		// Nothing of it runs; what a pause cut short left running stops.
		if err := h.Runtime().Destroy(ctx, h.Ref()); err != nil {
			return sandbox.EndLost, fmt.Errorf("stopping a sandbox paused to its filesystem: %w", err)
		}
		return "", nil
	}
	st, err := h.Runtime().Status(ctx, h.Ref())
	switch {
	case sb.State == sandbox.Paused && err == nil && st == runtime.StatePaused:
		return "", nil // stays paused (no agent to reach) until resumed
	case sb.State != sandbox.Running && sb.State != sandbox.Paused:
		return sandbox.EndLost, fmt.Errorf("it was %s", sb.State)
	case sb.State == sandbox.Running && time.Now().After(sb.ExpiresAt()) && !sb.Spec.PauseOnTimeout:
		// A pause_on_timeout sandbox is adopted instead: its watcher finds
		// the lifetime over at once and pauses it, as it would have.
		return sandbox.EndTimeout, fmt.Errorf("its lifetime ended at %s", sb.ExpiresAt().Format(time.RFC3339))
	case err != nil:
		return sandbox.EndLost, fmt.Errorf("runtime status: %w", err)
	case st != runtime.StateRunning:
		return sandbox.EndLost, fmt.Errorf("it was %s, but the runtime reports %q", sb.State, st)
	}
	client, err := h.Connect(ctx)
	if err != nil {
		if m.agentGoneReason(h) == sandbox.EndAgentChannelLost {
			// It runs, but what answers on its channel (if anything) is
			// not its agent: hijacked or silenced from inside.
			return sandbox.EndAgentChannelLost, fmt.Errorf("the sandbox runs but its agent channel does not answer as an agent: %w", err)
		}
		return sandbox.EndLost, err
	}
	if sb.State == sandbox.Paused {
		// The daemon stopped between recording a pause and finishing it:
		// the sandbox still runs, so it is running.
		if _, err := h.Apply(ctx, handle.Change{To: sandbox.Running, Edit: func(s *sandbox.Sandbox) { s.PausedAt = time.Time{} }}); err != nil {
			client.Close()
			return sandbox.EndLost, err
		}
	}
	if len(sb.Spec.Entrypoint) > 0 {
		if err := m.reattachEntrypoint(h, client); err != nil {
			client.Close()
			return sandbox.EndLost, err
		}
	}
	if err := m.serveVolumesNFS(h, client, sb.Spec); err != nil {
		client.Close()
		return sandbox.EndLost, err
	}
	h.SetAgent(client)
	m.watch(h)
	return "", nil
}

// reattachEntrypoint follows the entrypoint again; if it ended while the
// daemon was down, Connect replays its end and the sandbox ends normally.
func (m *Manager) reattachEntrypoint(h *handle.Handle, client *agentapi.Client) error {
	stream, err := client.Connect(m.ctx, 0, entrypointTag)
	if err != nil {
		return fmt.Errorf("re-attaching to the entrypoint: %w", err)
	}
	m.followEntrypoint(h, stream)
	return nil
}

// tearDownOrphans tears down every sandbox something on the host knows of
// (a runtime, the sandboxes directory, the network layer, the image
// leases) that has no live record, and drops image leases of snapshots
// that are gone.
func (m *Manager) tearDownOrphans(ctx context.Context, known map[string]bool) {
	orphans := map[string]runtime.Runtime{} // id -> the runtime that has it (nil: none says so)
	note := func(id string, rt runtime.Runtime) {
		if known[id] || !ids.Sandbox(id) {
			return
		}
		if orphans[id] == nil {
			orphans[id] = rt
		}
	}
	for _, rt := range m.cfg.Runtimes {
		list, err := rt.List(ctx)
		if err != nil {
			m.log.Error("listing runtime sandboxes", "runtime", rt.Name(), "err", err)
			continue
		}
		for _, id := range list {
			note(id, rt)
		}
	}
	entries, _ := os.ReadDir(m.cfg.sandboxesDir())
	for _, e := range entries {
		note(e.Name(), nil)
	}
	if n := m.host.Network; n != nil {
		list, err := n.List()
		if err != nil {
			m.log.Error("listing sandbox networks", "err", err)
		}
		for _, id := range list {
			note(id, nil)
		}
	}
	m.orphanLeases(known, note)
	for id, rt := range orphans {
		m.tearDownOrphan(ctx, id, rt)
	}
}

// orphanLeases notes the sandboxes holding image leases and releases the
// leases of snapshots without a record.
func (m *Manager) orphanLeases(known map[string]bool, note func(string, runtime.Runtime)) {
	if m.cfg.Images == nil {
		return
	}
	leases, err := m.cfg.Images.Leases()
	if err != nil {
		m.log.Error("listing image leases", "err", err)
		return
	}
	for id := range leases {
		switch {
		case known[id]:
		case ids.Snapshot(id):
			m.releaseLease(id)
		default:
			note(id, nil)
		}
	}
}

// tearDownOrphan runs the one teardown for an orphan: with the runtime
// that reported it, or with each runtime when none did (a directory,
// network or lease left by a crash).
func (m *Manager) tearDownOrphan(ctx context.Context, id string, rt runtime.Runtime) {
	rts := []runtime.Runtime{rt}
	if rt == nil {
		rts = rts[:0]
		for _, r := range m.cfg.Runtimes {
			rts = append(rts, r)
		}
	}
	rec := &sandbox.Sandbox{ID: id, Dir: filepath.Join(m.cfg.sandboxesDir(), id)}
	for _, r := range rts {
		m.log.Warn("tearing down an orphaned sandbox", "sandbox", id, "runtime", r.Name())
		if err := handle.New(rec, r, m.host).Teardown(ctx); err != nil {
			m.log.Error("tearing down an orphaned sandbox", "sandbox", id, "err", err)
		}
	}
}
