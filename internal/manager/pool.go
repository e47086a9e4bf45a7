package manager

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"corral/internal/errdefs"
	"corral/internal/manager/handle"
	"corral/internal/sandbox"
)

// ReservedTagPrefix begins the tag keys the daemon gives its own
// sandboxes (warm pools', builds', forks' copies); API callers may not
// set them. The one definition is the sandbox contract's.
const ReservedTagPrefix = sandbox.ReservedTagPrefix

// poolTag marks, in its record, a sandbox waiting in the warm pool; such
// sandboxes are not listed. A claim replaces the tags with the caller's.
const poolTag = ReservedTagPrefix + "pool"

// BuildStepTag marks an image build's sandbox (its value: the step); a
// restarted daemon ends such sandboxes, whose builds ended with the
// daemon that ran them.
const BuildStepTag = ReservedTagPrefix + "build/step"

// refillDelay spaces the pool's retries after a failed create.
const refillDelay = 5 * time.Second

// claimTimeout bounds one claim (a policy change, a record write, the
// entrypoint's start).
const claimTimeout = 30 * time.Second

// yieldPoll is how often a refill waiting for foreground creates to finish
// looks again.
const yieldPoll = 20 * time.Millisecond

// warmPool holds started sandboxes of one spec (an image, a runtime and
// resources; by default the base image, gvisor and the default
// resources), ready to be handed out by a create that asks for nothing
// they cannot take on after start. A claimed sandbox gets the caller's
// name, tags, env, workdir, user, timeouts, network policy, exposed ports
// and entrypoint (keeping the image's workdir and user where the caller
// names none, as a cold create would); its lifetime starts at the claim.
// Each pool refills itself in the background, one sandbox at a time and
// only while no caller's create is starting (low priority).
type warmPool struct {
	size int
	spec sandbox.Spec // normalized

	mu           sync.Mutex
	ready        []*handle.Handle
	filling      int
	hits, misses int64
	template     *sandbox.Snapshot // what a templated pool refills from (pooltemplate.go)
}

// WarmPoolConfig is one warm pool: Size sandboxes of Spec (only its
// runtime, image and resources matter).
type WarmPoolConfig struct {
	Spec sandbox.Spec
	Size int
	// Auto marks a pool the daemon chose by itself (the default spec's,
	// sized from the machine): another configured pool of the same spec
	// replaces it instead of conflicting.
	Auto bool
}

func newWarmPool(c WarmPoolConfig) (*warmPool, error) {
	spec := sandbox.Spec{Runtime: c.Spec.Runtime, Image: c.Spec.Image, CPU: c.Spec.CPU, CPULimit: c.Spec.CPULimit,
		MemoryMB: c.Spec.MemoryMB, MemoryLimitMB: c.Spec.MemoryLimitMB, DiskMB: c.Spec.DiskMB}
	if err := spec.Normalize(); err != nil {
		return nil, fmt.Errorf("warm pool: %w", err)
	}
	if c.Size < 1 {
		return nil, fmt.Errorf("warm pool of %s: size %d", spec.Image, c.Size)
	}
	return &warmPool{size: c.Size, spec: spec}, nil
}

// newPools checks the pools' configurations: valid specs, no two of the
// same shape (an Auto pool gives way to a configured one).
func newPools(cfgs []WarmPoolConfig) ([]*warmPool, error) {
	var pools []*warmPool
	var auto []bool
	for _, c := range cfgs {
		pool, err := newWarmPool(c)
		if err != nil {
			return nil, err
		}
		dup := slices.IndexFunc(pools, func(q *warmPool) bool { return sameShape(q.spec, pool.spec) })
		switch {
		case dup < 0:
			pools, auto = append(pools, pool), append(auto, c.Auto)
		case c.Auto:
			// a configured pool of this spec is there already
		case auto[dup]:
			pools[dup], auto[dup] = pool, false
		default:
			return nil, errdefs.Invalid("warm pools", "two pools of the same spec (%s on %s)", pool.spec.Image, pool.spec.Runtime)
		}
	}
	return pools, nil
}

// WarmPoolStatus describes one pool: its spec and size, the sandboxes
// ready now, and how many creates that fit it found one ready (hits) or
// not (misses, started cold) since the daemon started.
type WarmPoolStatus struct {
	Spec         sandbox.Spec
	Size, Ready  int
	Hits, Misses int64
}

// take removes and returns a ready sandbox, or nil, counting the hit or
// miss.
func (p *warmPool) take() *handle.Handle {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready) > 0 {
		h := p.ready[0]
		p.ready = p.ready[1:]
		if h.State() == sandbox.Running {
			p.hits++
			return h
		}
	}
	p.misses++
	return nil
}

// poolFor returns the pool whose sandboxes a create of spec can take, or
// nil.
func (m *Manager) poolFor(spec sandbox.Spec) *warmPool {
	for _, p := range m.pools {
		if sameShape(spec, p.spec) {
			return p
		}
	}
	return nil
}

// claimFromPool hands a create of spec a ready pooled sandbox; false when
// no pool fits or none is ready (the caller starts one cold).
func (m *Manager) claimFromPool(ctx context.Context, spec sandbox.Spec) (*sandbox.Sandbox, bool, error) {
	p := m.poolFor(spec)
	if p == nil {
		return nil, false, nil
	}
	defer m.refill()
	for {
		h := p.take()
		if h == nil {
			return nil, false, nil
		}
		rec, ok, err := m.claim(ctx, h, spec)
		if ok {
			return rec, true, nil
		}
		// Not usable (it died waiting) or half claimed (a failed policy
		// change or record write): it goes; the next one is tried.
		m.terminateAsync(h.ID(), sandbox.EndTerminated, nil)
		if err != nil {
			m.log.WarnContext(ctx, "warm pool: claiming a sandbox failed", "sandbox", h.ID(), "err", err)
		}
	}
}

// refill starts fills until every pool holds its size (ready or on
// their way).
func (m *Manager) refill() {
	if m.ctx.Err() != nil {
		return
	}
	for _, p := range m.pools {
		p.mu.Lock()
		n := p.size - len(p.ready) - p.filling
		p.filling += max(n, 0)
		p.mu.Unlock()
		for range n {
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				m.fillOne(p)
			}()
		}
	}
}

// fillOne starts one sandbox for p, at low priority: fills run one at a
// time, each once no caller's create is starting.
func (m *Manager) fillOne(p *warmPool) {
	h, err := m.createPooled(p)
	p.mu.Lock()
	p.filling--
	keep := err == nil && p.size > 0
	if keep {
		p.ready = append(p.ready, h)
	}
	p.mu.Unlock()
	if err == nil && !keep { // the pool was drained meanwhile
		if _, err := m.Terminate(context.WithoutCancel(m.ctx), h.ID(), sandbox.EndTerminated, nil); err != nil {
			m.log.Warn("terminating a warm pool sandbox", "sandbox", h.ID(), "err", err)
		}
		return
	}
	if err != nil {
		m.log.Warn("warm pool: creating a sandbox failed", "image", p.spec.Image, "runtime", p.spec.Runtime, "err", err)
		select {
		case <-m.ctx.Done():
		case <-time.After(refillDelay):
			m.refill()
		}
	}
}

// createPooled starts a sandbox of spec for a pool once it is this fill's
// turn and no foreground create is starting.
func (m *Manager) createPooled(p *warmPool) (*handle.Handle, error) {
	spec := p.spec
	select {
	case m.fillSlot <- struct{}{}:
	case <-m.ctx.Done():
		return nil, m.ctx.Err()
	}
	defer func() { <-m.fillSlot }()
	for m.foreground.Load() > 0 {
		select {
		case <-m.ctx.Done():
			return nil, m.ctx.Err()
		case <-time.After(yieldPoll):
		}
	}
	spec.Timeout = sandbox.MaxTimeout
	spec.Tags = map[string]string{poolTag: "warm"}
	if templated(spec) {
		return m.fillFromTemplate(p, spec)
	}
	rt, err := m.resolve(&spec)
	if err != nil {
		return nil, err
	}
	return m.launch(m.ctx, spec, rt, launchOpts{pooled: true})
}

// claim hands the pooled sandbox h to a create of spec; false when h can
// no longer be used, with the error if the claim failed halfway (the
// caller removes it and takes another, or starts one cold).
func (m *Manager) claim(ctx context.Context, h *handle.Handle, spec sandbox.Spec) (*sandbox.Sandbox, bool, error) {
	t0 := time.Now()
	// A caller that goes away mid-claim must not leave the sandbox half
	// claimed: the claim finishes (it is quick) whatever the caller does.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	h.Lock()
	defer h.Unlock()
	pooled := h.Record()
	client := h.Agent()
	if pooled.State != sandbox.Running || client == nil {
		return nil, false, nil
	}
	if m.networkEnabled() && !reflect.DeepEqual(pooled.Spec.Network, spec.Network) {
		if err := m.cfg.Network.Layer.SetPolicy(ctx, h.ID(), spec.Network); err != nil {
			return nil, false, fmt.Errorf("sandbox %s: setting network policy: %w", h.ID(), err)
		}
	}
	// What the pooled start took from the image stays: its digest, and
	// its workdir and user where the caller names none; and a copy of a
	// pool's template says so.
	spec.ImageDigest = pooled.Spec.ImageDigest
	spec.Workdir = or(spec.Workdir, pooled.Spec.Workdir)
	spec.User = or(spec.User, pooled.Spec.User)
	spec.FromSnapshot = pooled.Spec.FromSnapshot // a templated pool's copy names its template
	rec, err := h.Apply(ctx, handle.Change{
		Edit: func(s *sandbox.Sandbox) {
			s.Spec = spec
			s.CreatedAt, s.Lifetime = time.Now().UTC(), 0 // and so a new port token (PortToken)
		},
		Event: &handle.Event{Kind: "running", Message: "sandbox running (from the warm pool)", Fields: claimFields(h, spec)},
	})
	if err != nil {
		return nil, false, err
	}
	m.meterClaimed(h)
	h.Touch()
	// The pooled start gave it the daemon's CAs; the caller's own follow.
	if err := installCAs(ctx, client, spec.CACerts); err != nil {
		return nil, false, err
	}
	if len(spec.Entrypoint) > 0 {
		if err := m.startEntrypoint(ctx, h, client); err != nil {
			return nil, false, err
		}
	}
	phases := []sandbox.Phase{{Name: "claim", Duration: time.Since(t0)}}
	h.Edit(func(s *sandbox.Sandbox) { s.Phases = phases })
	rec.Phases = phases
	m.watch(h)
	return rec, true, nil
}

// mergeEnvMap returns base with over's entries replacing same-named ones.
func mergeEnvMap(base, over map[string]string) map[string]string {
	if len(base) == 0 {
		return over
	}
	out := maps.Clone(base)
	maps.Copy(out, over)
	return out
}

// drainPool terminates the sandboxes waiting in the pools (a stopping
// daemon; the next one fills its own).
func (m *Manager) drainPool() {
	var ready []*handle.Handle
	for _, p := range m.pools {
		p.mu.Lock()
		p.size = 0
		ready = append(ready, p.ready...)
		p.ready = nil
		p.mu.Unlock()
	}
	for _, h := range ready {
		if _, err := m.Terminate(m.ctx, h.ID(), sandbox.EndTerminated, nil); err != nil {
			m.log.Warn("terminating a warm pool sandbox", "sandbox", h.ID(), "err", err)
		}
	}
}

// WarmPools reports each pool's spec, size, ready sandboxes, hits and
// misses.
func (m *Manager) WarmPools() []WarmPoolStatus {
	out := make([]WarmPoolStatus, 0, len(m.pools))
	for _, p := range m.pools {
		p.mu.Lock()
		out = append(out, WarmPoolStatus{Spec: p.spec, Size: p.size, Ready: len(p.ready), Hits: p.hits, Misses: p.misses})
		p.mu.Unlock()
	}
	return out
}

// claimFields are a warm pool claim's running event's fields.
func claimFields(h *handle.Handle, spec sandbox.Spec) map[string]string {
	f := map[string]string{"runtime": h.Runtime().Name(), "warm": "true"}
	addIdentity(f, spec)
	return f
}
