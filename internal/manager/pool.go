package manager

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"corral/internal/sandbox"
)

// poolTag marks, in its record, a sandbox waiting in the warm pool; such
// sandboxes are not listed. A claim replaces the tags with the caller's.
const poolTag = "corral.pool"

// refillDelay spaces the pool's retries after a failed create.
const refillDelay = 5 * time.Second

// warmPool holds started sandboxes of the default spec (the base image,
// the default runtime, resources and network policy), ready to be handed
// out by a create that asks for nothing they cannot take on after start.
// A claimed sandbox gets the caller's name, tags, env, workdir, user,
// timeouts, network policy, exposed ports and entrypoint; its lifetime
// starts at the claim. The pool refills itself in the background.
type warmPool struct {
	size int
	spec sandbox.Spec // normalized default spec

	mu      sync.Mutex
	ready   []*live
	filling int
}

func newWarmPool(size int) (*warmPool, error) {
	spec := sandbox.Spec{}
	if err := spec.Normalize(); err != nil {
		return nil, err
	}
	return &warmPool{size: size, spec: spec}, nil
}

// fits reports whether a create of spec can take a pooled sandbox: the
// same runtime, image and resources (what a start fixes).
func (p *warmPool) fits(spec sandbox.Spec) bool {
	d := p.spec
	return spec.Runtime == d.Runtime && spec.Image == d.Image && spec.CPU == d.CPU && spec.CPULimit == d.CPULimit &&
		spec.MemoryMB == d.MemoryMB && spec.MemoryLimitMB == d.MemoryLimitMB && spec.DiskMB == d.DiskMB
}

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

// refill starts creates until the pool holds size sandboxes (ready or on
// their way).
func (m *Manager) refill() {
	p := m.pool
	if p == nil || m.ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	n := p.size - len(p.ready) - p.filling
	p.filling += max(n, 0)
	p.mu.Unlock()
	for range n {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.fillOne()
		}()
	}
}

// fillOne starts one pooled sandbox.
func (m *Manager) fillOne() {
	p := m.pool
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
		m.log.Warn("warm pool: creating a sandbox failed", "err", err)
		select {
		case <-m.ctx.Done():
		case <-time.After(refillDelay):
			m.refill()
		}
	}
}

func (m *Manager) createPooled(spec sandbox.Spec) (*live, error) {
	net, err := m.effectiveNetwork(spec.Network)
	if err != nil {
		return nil, err
	}
	spec.Network = net
	rt := m.cfg.Runtimes[spec.Runtime]
	if rt == nil {
		return nil, fmt.Errorf("runtime %s unavailable", spec.Runtime)
	}
	id := sandbox.NewID()
	sb := &sandbox.Sandbox{
		ID: id, Spec: spec, State: sandbox.Creating, CreatedAt: time.Now().UTC(),
		Dir: filepath.Join(m.cfg.sandboxesDir(), id), PortToken: newPortToken(),
	}
	l, err := m.admit(m.ctx, sb, rt)
	if err != nil {
		return nil, err
	}
	l.pooled = true
	l.op.Lock()
	defer l.op.Unlock()
	if err := m.start(m.ctx, l); err != nil {
		m.fail(l, err)
		return nil, err
	}
	return l, nil
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

// drainPool terminates the sandboxes waiting in the pool (a stopping
// daemon; the next one fills its own).
func (m *Manager) drainPool() {
	if m.pool == nil {
		return
	}
	m.pool.mu.Lock()
	m.pool.size = 0
	ready := m.pool.ready
	m.pool.ready = nil
	m.pool.mu.Unlock()
	for _, l := range ready {
		if _, err := m.Terminate(m.ctx, l.ref.ID, sandbox.EndTerminated, nil); err != nil {
			m.log.Warn("terminating a warm pool sandbox", "sandbox", l.ref.ID, "err", err)
		}
	}
}

// WarmPool reports the pool's size and how many sandboxes are ready; ok is
// false without a pool.
func (m *Manager) WarmPool() (size, ready int, ok bool) {
	if m.pool == nil {
		return 0, 0, false
	}
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	return m.pool.size, len(m.pool.ready), true
}
