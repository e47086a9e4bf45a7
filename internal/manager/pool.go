package manager

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"time"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// poolTag marks, in its record, a sandbox waiting in the warm pool; such
// sandboxes are not listed. A claim replaces the tags with the caller's.
const poolTag = "corral.pool"

// refillDelay spaces the pool's retries after a failed create.
const refillDelay = 5 * time.Second

// warmPool holds started sandboxes of one spec (an image, a runtime and
// resources; by default the base image, gvisor and the default
// resources), ready to be handed out by a create that asks for nothing
// they cannot take on after start. A claimed sandbox gets the caller's
// name, tags, env, workdir, user, timeouts, network policy, exposed ports
// and entrypoint; its lifetime starts at the claim. Each pool refills
// itself in the background.
type warmPool struct {
	size int
	spec sandbox.Spec // normalized

	mu      sync.Mutex
	ready   []*live
	filling int
}

// WarmPoolConfig is one warm pool: Size sandboxes of Spec (only its
// runtime, image and resources matter).
type WarmPoolConfig struct {
	Spec sandbox.Spec
	Size int
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
// same shape.
func newPools(cfgs []WarmPoolConfig) ([]*warmPool, error) {
	var pools []*warmPool
	for _, c := range cfgs {
		pool, err := newWarmPool(c)
		if err != nil {
			return nil, err
		}
		for _, q := range pools {
			if sameShape(q.spec, pool.spec) {
				return nil, errdefs.Invalid("warm pools", "two pools of the same spec (%s on %s)", pool.spec.Image, pool.spec.Runtime)
			}
		}
		pools = append(pools, pool)
	}
	return pools, nil
}

// WarmPoolStatus describes one pool.
type WarmPoolStatus struct {
	Spec        sandbox.Spec
	Size, Ready int
}

// fits reports whether a create of spec can take a pooled sandbox: the
// same runtime, image and resources (what a start fixes).
func (p *warmPool) fits(spec sandbox.Spec) bool { return sameShape(spec, p.spec) }

// take removes and returns a ready sandbox, or nil.
func (p *warmPool) take() *live {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready) > 0 {
		l := p.ready[0]
		p.ready = p.ready[1:]
		if l.state() == sandbox.Running {
			return l
		}
	}
	return nil
}

// poolFor returns the pool whose sandboxes a create of spec can take, or
// nil.
func (m *Manager) poolFor(spec sandbox.Spec) *warmPool {
	for _, p := range m.pools {
		if p.fits(spec) {
			return p
		}
	}
	return nil
}

// refill starts creates until every pool holds its size (ready or on
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

// fillOne starts one sandbox for p.
func (m *Manager) fillOne(p *warmPool) {
	spec := p.spec
	spec.Timeout = sandbox.MaxTimeout
	spec.Tags = map[string]string{poolTag: "warm"}
	l, err := m.createPooled(spec)
	p.mu.Lock()
	p.filling--
	keep := err == nil && p.size > 0
	if keep {
		p.ready = append(p.ready, l)
	}
	p.mu.Unlock()
	if err == nil && !keep { // the pool was drained meanwhile
		if _, err := m.Terminate(context.WithoutCancel(m.ctx), l.ref.ID, sandbox.EndTerminated, nil); err != nil {
			m.log.Warn("terminating a warm pool sandbox", "sandbox", l.ref.ID, "err", err)
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

func (m *Manager) createPooled(spec sandbox.Spec) (*live, error) {
	rt, err := m.resolve(&spec)
	if err != nil {
		return nil, err
	}
	return m.launch(m.ctx, spec, rt, func(l *live) { l.pooled = true })
}

// claim hands the pooled sandbox l to a create of spec; false when l can
// no longer be used (the caller then creates one cold).
func (m *Manager) claim(ctx context.Context, l *live, spec sandbox.Spec) (*sandbox.Sandbox, bool, error) {
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	client := l.client
	ok := l.sb.State == sandbox.Running && client != nil
	pooledNet := l.sb.Spec.Network
	l.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	if m.networkEnabled() && !reflect.DeepEqual(pooledNet, spec.Network) {
		if err := m.cfg.Network.Layer.SetPolicy(ctx, l.ref.ID, spec.Network); err != nil {
			return nil, false, fmt.Errorf("sandbox %s: setting network policy: %w", l.ref.ID, err)
		}
	}
	l.mu.Lock()
	spec.ImageDigest = l.sb.Spec.ImageDigest
	l.sb.Spec = spec
	l.sb.CreatedAt = time.Now().UTC()
	l.sb.PortToken = newPortToken()
	l.pooled = false
	l.lastActive = time.Now()
	rec := l.sb
	l.mu.Unlock()
	if err := m.store.PutSandbox(ctx, &rec); err != nil {
		return nil, false, err
	}
	if len(spec.Entrypoint) > 0 {
		if err := m.startEntrypoint(ctx, l, client); err != nil {
			return nil, false, err
		}
	}
	m.event(rec.ID, "running", "sandbox running (from the warm pool)", map[string]string{"runtime": l.rt.Name(), "warm": "true"})
	m.watch(l, client)
	return l.snapshot(), true, nil
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
	var ready []*live
	for _, p := range m.pools {
		p.mu.Lock()
		p.size = 0
		ready = append(ready, p.ready...)
		p.ready = nil
		p.mu.Unlock()
	}
	for _, l := range ready {
		if _, err := m.Terminate(m.ctx, l.ref.ID, sandbox.EndTerminated, nil); err != nil {
			m.log.Warn("terminating a warm pool sandbox", "sandbox", l.ref.ID, "err", err)
		}
	}
}

// WarmPools reports each pool's spec, size and ready sandboxes.
func (m *Manager) WarmPools() []WarmPoolStatus {
	out := make([]WarmPoolStatus, 0, len(m.pools))
	for _, p := range m.pools {
		p.mu.Lock()
		out = append(out, WarmPoolStatus{Spec: p.spec, Size: p.size, Ready: len(p.ready)})
		p.mu.Unlock()
	}
	return out
}
