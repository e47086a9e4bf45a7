// Package manager owns the sandboxes of one daemon: it admits creates, drives
// each sandbox through the lifecycle state machine (internal/sandbox), starts
// it on a runtime, connects to its agent, enforces timeouts and idle
// timeouts, and reconciles its records with what runs after a restart.
//
// It imports contracts (sandbox, runtime, agentapi, store, errdefs), never a
// runtime backend or the HTTP API.
package manager

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	imagestore "corral/internal/image/store"
	"corral/internal/netpolicy/policy"
	"corral/internal/runtime"
	"corral/internal/sandbox"
	"corral/internal/store"
)

// Config configures a Manager.
type Config struct {
	// StateDir holds sandboxes/<id> (runtime-owned) and logs/<id>.log.
	StateDir string
	// BaseRootFS is the root filesystem of the "base" image.
	BaseRootFS string
	// AgentBinary is the static corral binary run as PID 1 in sandboxes.
	AgentBinary string
	// Runtimes by API name. A name in sandbox.Runtimes that is missing here
	// is answered with ErrNotSupported.
	Runtimes map[string]runtime.Runtime
	Store    *store.Store
	Logger   *slog.Logger
	// Network gives sandboxes a namespace and a policy; nil: sandboxes
	// run with no network (block_network).
	Network *Networking
	// Unavailable says why a runtime the API knows is missing here (vm
	// without QEMU or a guest kernel), for the error a create gets.
	Unavailable map[string]string
	// Images holds images other than the base; nil: only "base" exists.
	Images *imagestore.Store
	// MaxSandboxes bounds live sandboxes (admission control). Default 64.
	MaxSandboxes int
	// AgentTimeout bounds the wait for a new sandbox's agent. Default 30 s.
	AgentTimeout time.Duration
	// WarmPools are the warm pools: started sandboxes of a spec kept
	// ready for creates that fit it.
	WarmPools []WarmPoolConfig
}

// Manager is the sandbox manager. Its methods are safe for concurrent use.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	store *store.Store

	ctx    context.Context // lifetime; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	live map[string]*live

	decisions chan policy.Decision // egress decisions for the event log

	pools []*warmPool

	versions map[string]string // runtime name -> version (runtimeVersion)
}

// New builds a Manager and reconciles the store with what the runtimes run.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.MaxSandboxes <= 0 {
		cfg.MaxSandboxes = 64
	}
	if cfg.AgentTimeout <= 0 {
		cfg.AgentTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for _, d := range []string{cfg.sandboxesDir(), cfg.logsDir(), cfg.snapshotsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	pools, err := newPools(cfg.WarmPools)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &Manager{cfg: cfg, log: cfg.Logger, store: cfg.Store, ctx: lctx, cancel: cancel, live: map[string]*live{},
		versions: map[string]string{}, pools: pools,
		decisions: make(chan policy.Decision, maxPendingDecisions)}
	m.wg.Add(1)
	go m.writeDecisions()
	if err := m.reconcile(ctx); err != nil {
		cancel()
		m.wg.Wait()
		return nil, fmt.Errorf("reconciling sandboxes: %w", err)
	}
	m.refill()
	return m, nil
}

// Close stops the manager's background work. Sandboxes keep running; the
// next daemon reconciles and adopts them.
func (m *Manager) Close() {
	m.drainPool()
	m.cancel()
	m.mu.Lock()
	for _, l := range m.live {
		l.detach()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (c *Config) sandboxesDir() string { return filepath.Join(c.StateDir, "sandboxes") }
func (c *Config) logsDir() string      { return filepath.Join(c.StateDir, "logs") }
func (c *Config) logPath(id string) string {
	return filepath.Join(c.logsDir(), id+".log")
}

// Runtimes lists the runtime names this manager can start.
func (m *Manager) Runtimes() []string {
	var out []string
	for n := range m.cfg.Runtimes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Get returns a copy of the record of id.
func (m *Manager) Get(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	if !sandbox.ValidID(id) {
		return nil, fmt.Errorf("%w: sandbox %q", errdefs.ErrNotFound, id)
	}
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	if l != nil {
		return l.snapshot(), nil
	}
	return m.store.GetSandbox(ctx, id)
}

// List returns every sandbox record, oldest first, live ones as they are now.
func (m *Manager) List(ctx context.Context) ([]*sandbox.Sandbox, error) {
	recs, err := m.store.ListSandboxes(ctx, false)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := recs[:0]
	for _, r := range recs {
		if l := m.live[r.ID]; l != nil {
			r = l.snapshot()
		}
		if r.Spec.Tags[poolTag] != "" && !r.State.Terminal() {
			continue // waiting in the warm pool
		}
		out = append(out, r)
	}
	return out, nil
}

// Events returns the event log of a sandbox.
func (m *Manager) Events(ctx context.Context, id string, after int64, limit int) ([]store.Event, error) {
	if _, err := m.Get(ctx, id); err != nil {
		return nil, err
	}
	return m.store.Events(ctx, id, after, limit)
}

// event appends to the sandbox's event log; failures are logged, not fatal.
func (m *Manager) event(id, kind, msg string, fields map[string]string) {
	err := m.store.AppendEvent(context.WithoutCancel(m.ctx), store.Event{SandboxID: id, Kind: kind, Message: msg, Fields: fields})
	if err != nil {
		m.log.Warn("appending event", "sandbox", id, "err", err)
	}
}

// agentFor returns the live agent client of a running sandbox and marks the
// sandbox active until release is called.
func (m *Manager) agentFor(id string) (*agentapi.Client, *live, func(), error) {
	l, err := m.liveOf(id)
	if err != nil {
		return nil, nil, nil, err
	}
	c, release, err := l.acquire()
	if err != nil && l.state() == sandbox.Paused && l.snapshot().Spec.AutoPause {
		// Paused for idleness: this call wakes it.
		ctx, cancel := context.WithTimeout(m.ctx, pauseTimeout)
		_, rerr := m.Resume(ctx, id)
		cancel()
		if c, release, err = l.acquire(); err != nil && rerr != nil {
			err = rerr
		}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return c, l, release, nil
}
