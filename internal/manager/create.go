package manager

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"time"

	"corral/internal/agentapi"
	"corral/internal/cleanup"
	"corral/internal/errdefs"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// entrypointTag tags the entrypoint process so a restarted daemon can
// re-attach to it.
const entrypointTag = "corral-entrypoint"

// Create validates spec, starts a sandbox and returns its record once the
// agent answers (state running). On any failure everything created is
// undone and the record ends as failed.
func (m *Manager) Create(ctx context.Context, spec sandbox.Spec) (*sandbox.Sandbox, error) {
	var from *sandbox.Snapshot
	if spec.FromSnapshot != "" {
		if !sandbox.ValidSnapshotRef(spec.FromSnapshot) {
			return nil, errdefs.Invalid("from_snapshot", "%q is neither a snapshot id nor a snapshot name", spec.FromSnapshot)
		}
		rec, err := m.Snapshot(ctx, spec.FromSnapshot)
		if err != nil {
			return nil, err
		}
		if err := fromSnapshot(&spec, rec); err != nil {
			return nil, err
		}
		if err := m.checkRestorable(ctx, rec); err != nil {
			return nil, err
		}
		from = rec
	}
	if err := spec.Normalize(); err != nil {
		return nil, err
	}
	rt, err := m.resolve(&spec)
	if err != nil {
		return nil, err
	}
	if pool := m.poolFor(spec); pool != nil && from == nil {
		if l := pool.take(); l != nil {
			defer m.refill()
			sb, ok, err := m.claim(ctx, l, spec)
			if ok || err != nil {
				return sb, err
			}
		}
	}
	l, err := m.launch(ctx, spec, rt, func(l *live) { l.from = from })
	if err != nil {
		return nil, err
	}
	return l.snapshot(), nil
}

// resolve applies the operator's network policy to a normalized spec and
// returns its runtime.
func (m *Manager) resolve(spec *sandbox.Spec) (runtime.Runtime, error) {
	net, err := m.effectiveNetwork(spec.Network)
	if err != nil {
		return nil, err
	}
	spec.Network = net
	rt := m.cfg.Runtimes[spec.Runtime]
	if rt == nil {
		if why := m.cfg.Unavailable[spec.Runtime]; why != "" {
			return nil, fmt.Errorf("%w: runtime %q is unavailable on this daemon: %s", errdefs.ErrNotSupported, spec.Runtime, why)
		}
		return nil, fmt.Errorf("%w: runtime %q is not supported by this daemon (available: %v)", errdefs.ErrNotSupported, spec.Runtime, m.Runtimes())
	}
	return rt, nil
}

// launch records and starts a new sandbox of spec on rt; mark sets what
// the start must know (a snapshot to copy, a pool to wait in) before it
// begins. A failed start is recorded as failed, with everything undone.
func (m *Manager) launch(ctx context.Context, spec sandbox.Spec, rt runtime.Runtime, mark func(*live)) (*live, error) {
	id := sandbox.NewID()
	sb := &sandbox.Sandbox{
		ID: id, Spec: spec, State: sandbox.Creating, CreatedAt: time.Now().UTC(),
		Dir: filepath.Join(m.cfg.sandboxesDir(), id), PortToken: newPortToken(),
	}
	l, err := m.admit(ctx, sb, rt)
	if err != nil {
		return nil, err
	}
	mark(l)
	l.op.Lock()
	defer l.op.Unlock()
	if err := m.start(ctx, l); err != nil {
		m.fail(l, err)
		return nil, fmt.Errorf("creating sandbox %s: %w", id, err)
	}
	return l, nil
}

// admit records the new sandbox (durably, before anything is created, so a
// crash mid-create is reconciled) and registers it, within the live limit.
func (m *Manager) admit(ctx context.Context, sb *sandbox.Sandbox, rt runtime.Runtime) (*live, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.live) >= m.cfg.MaxSandboxes {
		return nil, fmt.Errorf("%w: %d sandboxes already live (limit %d)", errdefs.ErrResourceExhausted, len(m.live), m.cfg.MaxSandboxes)
	}
	if err := m.store.PutSandbox(ctx, sb); err != nil {
		return nil, err
	}
	l := newLive(sb, rt)
	m.live[sb.ID] = l
	return l, nil
}

// start runs the create steps; each registers its undo.
func (m *Manager) start(ctx context.Context, l *live) error {
	c := cleanup.Make(ctx)
	defer c.Clean()
	sb := l.snapshot()
	params := runtime.StartParams{
		Ref:         l.ref,
		AgentBinary: m.cfg.AgentBinary,
		Env:         envList(sb.Spec.Env),
		Resources:   resourcesOf(sb.Spec),
		Hostname:    sb.ID,
	}
	if err := m.prepareImage(c, l, &params); err != nil {
		return err
	}
	c.Add(func(ctx context.Context) {
		if err := m.detachNetwork(ctx, sb.ID); err != nil {
			m.log.Error("rolling back sandbox network", "sandbox", sb.ID, "err", err)
		}
	})
	netID, err := m.attachNetwork(ctx, sb.ID, sb.Spec.Network, &params)
	if err != nil {
		return err
	}
	c.Add(func(ctx context.Context) {
		if err := l.rt.Destroy(ctx, l.ref); err != nil {
			m.log.Error("rolling back sandbox", "sandbox", sb.ID, "err", err)
		}
	})
	if err := m.startRuntime(ctx, l, params); err != nil {
		return fmt.Errorf("starting runtime %s: %w", l.rt.Name(), err)
	}
	client, err := m.connect(ctx, l)
	if err != nil {
		return err
	}
	c.Add(func(context.Context) { client.Close() })
	if l.from != nil {
		if err := m.giveIdentity(ctx, l, client, netID, params.Nameservers); err != nil {
			return err
		}
	}
	if len(sb.Spec.Entrypoint) > 0 {
		if err := m.startEntrypoint(ctx, l, client); err != nil {
			return err
		}
	}
	var info map[string]string
	if d, ok := l.rt.(runtime.Describer); ok {
		info = d.Describe(l.ref)
	}
	rec, err := l.move(sandbox.Running, func(s *sandbox.Sandbox) {
		s.StartedAt = time.Now().UTC()
		s.AgentVersion = client.AgentVersion()
		s.RuntimeInfo = info
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.client = client
	l.mu.Unlock()
	if err := m.store.PutSandbox(ctx, rec); err != nil {
		return err
	}
	c.Release()
	fields := map[string]string{"runtime": l.rt.Name(), "agent": client.AgentVersion()}
	for k, v := range info {
		fields[k] = v
	}
	l.mu.Lock()
	pooled := l.pooled
	l.mu.Unlock()
	if pooled {
		return nil // started and watched when handed out
	}
	m.event(sb.ID, "running", "sandbox running", fields)
	m.watch(l, client)
	return nil
}

// startRuntime starts the sandbox cold, or as a copy of its snapshot.
func (m *Manager) startRuntime(ctx context.Context, l *live, params runtime.StartParams) error {
	if l.from == nil {
		return l.rt.Start(ctx, params)
	}
	sn, ok := l.rt.(runtime.Snapshotter)
	if !ok {
		return fmt.Errorf("%w: runtime %s cannot restore memory snapshots", errdefs.ErrNotSupported, l.rt.Name())
	}
	return sn.StartFromSnapshot(ctx, params, l.from.Dir)
}

// connect dials the agent and negotiates the protocol, within AgentTimeout.
func (m *Manager) connect(ctx context.Context, l *live) (*agentapi.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.AgentTimeout)
	defer cancel()
	return agentapi.Connect(ctx, func(ctx context.Context) (net.Conn, error) { return l.rt.Dial(ctx, l.ref) })
}

// fail records a failed create. The runtime side was already rolled back.
func (m *Manager) fail(l *live, cause error) {
	rec, err := l.move(sandbox.Failed, func(s *sandbox.Sandbox) {
		s.EndedAt = time.Now().UTC()
		s.EndReason = sandbox.EndFailed
		s.Error = cause.Error()
		code := sandbox.ExitCodeFor(sandbox.EndFailed)
		s.ExitCode = &code
	})
	if err == nil {
		if err := m.store.PutSandbox(context.WithoutCancel(m.ctx), rec); err != nil {
			m.log.Error("recording failed sandbox", "sandbox", rec.ID, "err", err)
		}
	}
	m.event(l.ref.ID, "failed", cause.Error(), nil)
	m.forget(l)
}

// forget drops a terminal sandbox from the live set and wakes waiters.
func (m *Manager) forget(l *live) {
	m.mu.Lock()
	delete(m.live, l.ref.ID)
	m.mu.Unlock()
	l.detach()
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
	default:
		close(l.done)
	}
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func resourcesOf(s sandbox.Spec) runtime.Resources {
	return runtime.Resources{
		CPURequestMilli: int64(s.CPU * 1000),
		CPULimitMilli:   int64(s.CPULimit * 1000),
		MemoryRequestMB: s.MemoryMB,
		MemoryLimitMB:   s.MemoryLimitMB,
		DiskMB:          s.DiskMB,
		PidsLimit:       sandbox.DefaultPidsLimit,
	}
}
