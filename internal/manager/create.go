package manager

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
	"corral/internal/telemetry"
)

// entrypointTag tags the entrypoint process so a restarted daemon can
// re-attach to it.
const entrypointTag = "corral-entrypoint"

// create is Create, saying in st how the create went for the telemetry
// (telemetry.go).
func (m *Manager) create(ctx context.Context, spec sandbox.Spec, st *createStat) (*sandbox.Sandbox, error) {
	h, err := m.createAs(ctx, spec, st, "")
	if err != nil || h == nil {
		return st.pooled, err
	}
	return h.Record(), nil
}

// createAs is create, under id when it is set (a sandbox moved from
// another node keeps its id: movein.go); it returns the started
// sandbox's handle, or nil and the record in st.pooled when a warm pool
// served it.
func (m *Manager) createAs(ctx context.Context, spec sandbox.Spec, st *createStat, id string) (*handle.Handle, error) {
	st.runtime = spec.Runtime
	var from *sandbox.Snapshot
	if spec.FromSnapshot != "" {
		rec, err := m.snaps.restorable(ctx, &spec)
		if err != nil {
			return nil, err
		}
		from = rec
		st.source = telemetry.SourceSnapshot
	}
	if err := spec.Normalize(); err != nil {
		return nil, err
	}
	st.runtime = spec.Runtime
	if err := m.checkVolumes(spec); err != nil {
		return nil, err
	}
	rt, err := m.resolve(&spec)
	if err != nil {
		return nil, err
	}
	if err := m.resolveSecrets(ctx, &spec); err != nil {
		return nil, err
	}
	m.caEnv(&spec)
	release, err := m.reserveName(spec.Name)
	if err != nil {
		return nil, err
	}
	defer release()
	if from == nil && len(spec.Volumes) == 0 && !usesSecrets(spec) {
		if rec, ok, err := m.claimFromPool(ctx, spec); ok || err != nil {
			st.source, st.pooled = telemetry.SourcePool, rec
			return nil, err
		}
	}
	m.foreground.Add(1)
	defer m.foreground.Add(-1)
	return m.launch(ctx, spec, rt, launchOpts{from: from, id: id})
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

// launchOpts are what a start must know besides the spec.
type launchOpts struct {
	from   *sandbox.Snapshot // start as a copy of this memory snapshot
	pooled bool              // for a warm pool: not announced or watched until claimed
	id     string            // the sandbox's id ("": a new one)
}

// launch records and starts a new sandbox of spec on rt. A failed start
// is torn down and recorded as failed.
func (m *Manager) launch(ctx context.Context, spec sandbox.Spec, rt runtime.Runtime, o launchOpts) (*handle.Handle, error) {
	t0 := time.Now()
	id := o.id
	if id == "" {
		id = ids.NewSandbox()
	}
	rec := &sandbox.Sandbox{
		ID: id, Spec: spec, State: sandbox.Creating, CreatedAt: t0.UTC(),
		Dir: filepath.Join(m.cfg.sandboxesDir(), id),
	}
	h, err := m.admit(rec, rt)
	if err != nil {
		return nil, err
	}
	h.Lock()
	defer h.Unlock()
	// The creating record is written while the start goes on: until the
	// start's own record write (which waits for it) nothing is
	// acknowledged, and what a crash meanwhile leaves on the host has no
	// live record, so reconcile destroys it as an orphan.
	admitted := make(chan error, 1)
	go func() {
		admitted <- m.records.PutSandbox(context.WithoutCancel(ctx), rec)
		close(admitted) // a second receive (after a failure) does not block
	}()
	tr := newTrace(t0)
	tr.step("admission")
	err = m.turn(ctx, func() error {
		tr.step("queued")
		return m.start(ctx, h, o, tr, admitted)
	})
	if err != nil {
		<-admitted
		h.Fail(err)
		m.forget(h)
		return nil, fmt.Errorf("creating sandbox %s: %w", id, err)
	}
	return h, nil
}

// turn runs start once fewer than MaxStarting sandboxes are starting.
func (m *Manager) turn(ctx context.Context, start func() error) error {
	select {
	case m.starting <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for a turn to start: %w", errdefs.ErrUnavailable, ctx.Err())
	}
	defer func() { <-m.starting }()
	return start()
}

// admit registers a new sandbox within the live limit and the host's
// capacity (capacity.go); its record is written by the caller, outside the
// manager's lock.
func (m *Manager) admit(rec *sandbox.Sandbox, rt runtime.Runtime) (*handle.Handle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.admissible(rec.Spec); err != nil {
		return nil, err
	}
	if m.handles[rec.ID] != nil {
		return nil, fmt.Errorf("%w: sandbox %s is live here", errdefs.ErrAlreadyExists, rec.ID)
	}
	h := handle.New(rec, rt, m.host)
	m.handles[rec.ID] = h
	return h, nil
}

// start runs the create steps, each timed into tr; a failure anywhere is
// undone by the caller's one teardown (handle.Fail). admitted delivers the
// result of the creating record's write.
func (m *Manager) start(ctx context.Context, h *handle.Handle, o launchOpts, tr *trace, admitted <-chan error) error {
	rec := h.Record()
	// PID 1 gets the image's env only (prepareImage): the sandbox's own,
	// which may hold secrets, reaches processes with each start (exec,
	// entrypoint) and so is never written into the runtime's files (an
	// OCI bundle, a vm's boot config).
	params := runtime.StartParams{
		Ref: h.Ref(), AgentBinary: m.cfg.AgentBinary,
		Resources: resourcesOf(rec.Spec), Hostname: rec.ID, Trace: tr.sub("runtime."),
	}
	if err := m.prepareImage(h, &params); err != nil {
		return err
	}
	tr.step("image")
	netID, err := m.attachNetwork(ctx, rec.ID, rec.Spec.Network, &params)
	if err != nil {
		return err
	}
	tr.step("network")
	if err := m.mountVolumes(ctx, rec.Spec, &params); err != nil {
		return err
	}
	if err := startRuntime(ctx, h.Runtime(), params, o.from); err != nil {
		return fmt.Errorf("starting runtime %s: %w", h.Runtime().Name(), err)
	}
	tr.step("runtime")
	client, err := h.Connect(ctx)
	if err != nil {
		return err
	}
	h.SetAgent(client)
	tr.step("agent")
	if err := m.mountVolumesNFS(ctx, h, client, rec.Spec); err != nil {
		return err
	}
	volumeEvents(h, rec.Spec)
	own, err := m.secretCAPEMs(rec)
	if err != nil {
		return err
	}
	if cas := append(m.sandboxCAs(rec.Spec), own...); len(cas) > 0 {
		if err := installCAs(ctx, client, cas); err != nil {
			return err
		}
		tr.step("ca_certs")
	}
	if o.from != nil {
		if err := m.giveIdentity(ctx, h, client, netID, params.Nameservers); err != nil {
			return err
		}
		tr.step("identity")
	}
	if len(rec.Spec.Entrypoint) > 0 {
		if err := m.startEntrypoint(ctx, h, client); err != nil {
			return err
		}
		tr.step("entrypoint")
	}
	if err := <-admitted; err != nil {
		return fmt.Errorf("recording the sandbox: %w", err)
	}
	tr.step("admitted")
	return m.markRunning(ctx, h, client, o.pooled, tr)
}

// markRunning persists the running state (with its event, in the same
// write) and starts the watchers, unless the sandbox waits in a pool.
func (m *Manager) markRunning(ctx context.Context, h *handle.Handle, client *agentapi.Client, pooled bool, tr *trace) error {
	var info map[string]string
	if d, ok := h.Runtime().(runtime.Describer); ok {
		info = d.Describe(h.Ref())
	}
	fields := map[string]string{"runtime": h.Runtime().Name(), "agent": client.AgentVersion()}
	for k, v := range info {
		fields[k] = v
	}
	addIdentity(fields, h.Record().Spec)
	ch := handle.Change{To: sandbox.Running, Edit: func(s *sandbox.Sandbox) {
		s.StartedAt = time.Now().UTC()
		s.AgentVersion = client.AgentVersion()
		s.RuntimeInfo = info
	}}
	if !pooled {
		ch.Event = &handle.Event{Kind: "running", Message: "sandbox running", Fields: fields}
	}
	if _, err := h.Apply(ctx, ch); err != nil {
		return err
	}
	phases := tr.done("record")
	h.Edit(func(s *sandbox.Sandbox) { s.Phases = phases })
	if !pooled {
		m.watch(h)
	}
	return nil
}

// startRuntime starts the sandbox cold, or as a copy of its snapshot.
func startRuntime(ctx context.Context, rt runtime.Runtime, params runtime.StartParams, from *sandbox.Snapshot) error {
	if from == nil {
		return rt.Start(ctx, params)
	}
	sn, ok := rt.(runtime.Snapshotter)
	if !ok {
		return fmt.Errorf("%w: runtime %s cannot restore memory snapshots", errdefs.ErrNotSupported, rt.Name())
	}
	return sn.StartFromSnapshot(ctx, params, from.Dir)
}

// forget drops a handle that is done (terminal, or given up) from the
// index.
func (m *Manager) forget(h *handle.Handle) {
	m.mu.Lock()
	if m.handles[h.ID()] == h {
		delete(m.handles, h.ID())
	}
	m.mu.Unlock()
	m.cas.drop(h.ID())
	m.nfs.stop(h.ID())
	if rec := h.Record(); rec.State.Terminal() {
		m.dropFSImage(rec.FSImage)
	}
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

// addIdentity adds what a running event says of the sandbox (and its
// create entry in the audit trail): its image and, when it has one, its
// name.
func addIdentity(fields map[string]string, spec sandbox.Spec) {
	fields["image"] = spec.Image
	if spec.Name != "" {
		fields["name"] = spec.Name
	}
}
