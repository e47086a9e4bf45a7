// Package manager owns the sandboxes of one daemon. The Manager itself
// admits creates and keeps the index of live sandboxes, each a
// handle.Handle (which owns its lock, record, agent connection, state
// changes and teardown); it drives them through create, the watchers
// (timeouts, idle timeouts, agent loss), terminate and reconcile after a
// restart. Everything else callers do to sandboxes goes through small
// services over handles, one per file: Processes (exec.go), Files
// (files.go), Ports (ports.go), Snapshots (snapshot.go, fork.go), Images
// (images.go), the warm pools (pool.go), and the metrics sampler's view of
// the live sandboxes (metrics.go, over internal/metrics).
//
// It imports contracts (sandbox, runtime, agentapi, records, errdefs) and
// the resource owners (netpolicy, the image store), never a runtime backend
// or the HTTP API.
package manager

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"corral/internal/agentapi"
	"corral/internal/audit"
	"corral/internal/errdefs"
	"corral/internal/ids"
	imagestore "corral/internal/image/store"
	"corral/internal/keylimit"
	"corral/internal/manager/handle"
	"corral/internal/metrics"
	"corral/internal/records"
	"corral/internal/runtime"
	"corral/internal/sandbox"
	"corral/internal/sandboxlog"
	"corral/internal/telemetry"
	"corral/internal/volume"
)

// Config configures a Manager.
type Config struct {
	// StateDir holds sandboxes/<id> (runtime-owned), logs/<id>.log and
	// snapshots/<id>.
	StateDir string
	// BaseRootFS is the root filesystem of the "base" image.
	BaseRootFS string
	// AgentBinary is the static corral binary run as PID 1 in sandboxes.
	AgentBinary string
	// CACerts are PEM CA certificates every sandbox (image builds' too)
	// trusts beyond its image's, before its own (Spec.CACerts).
	CACerts []string
	// Runtimes by API name. A name in sandbox.Runtimes that is missing here
	// is answered with ErrNotSupported.
	Runtimes map[string]runtime.Runtime
	Records  *records.Store
	Logger   *slog.Logger
	// Network gives sandboxes a namespace and a policy; nil: sandboxes
	// run with no network (block_network).
	Network *Networking
	// Unavailable says why a runtime the API knows is missing here (vm
	// without QEMU or a guest kernel), for the error a create gets.
	Unavailable map[string]string
	// Images holds images other than the base; nil: only "base" exists.
	Images *imagestore.Store
	// MaxSandboxes bounds live sandboxes (admission control). Default
	// DefaultMaxSandboxes.
	MaxSandboxes int
	// AgentTimeout bounds the wait for a new sandbox's agent. Default 30 s.
	AgentTimeout time.Duration
	// MaxStarting bounds the sandboxes starting at once (runtime start to
	// agent handshake); more creates queue for a turn, so a burst shares
	// the CPUs instead of timing out together. Default DefaultMaxStarting.
	MaxStarting int
	// WarmPools are the warm pools: started sandboxes of a spec kept
	// ready for creates that fit it.
	WarmPools []WarmPoolConfig
	// PortKey is the HMAC key of port tokens (PortToken): a key of the
	// daemon's own that outlives restarts. Nil: a random one, so tokens
	// change when the manager does.
	PortKey []byte
	// SecretCASeed derives each sandbox's egress CA (secrets.NewCA): a
	// key of the daemon's own. Nil: a random one, so a restarted manager's
	// sandboxes' CAs change.
	SecretCASeed []byte
	// Capacity is what admission reserves sandboxes' requests against
	// (capacity.go); zero: only MaxSandboxes bounds admission.
	Capacity Capacity
	// PortConns bounds the connections to exposed ports (limits.go).
	PortConns PortConns
	// SnapshotQuota bounds memory snapshots (snapquota.go).
	SnapshotQuota SnapshotQuota
	// MetricsInterval is the time between the metrics sampler's rounds
	// (internal/metrics): 0 means metrics.DefaultInterval, negative turns
	// sampling off. MetricsKeep bounds the samples kept per sandbox (0:
	// metrics.DefaultKeep).
	MetricsInterval time.Duration
	MetricsKeep     int
	// Retention bounds how long ended sandboxes' records, events and logs
	// are kept (retention.go); zero keeps them forever.
	Retention Retention
	// Metering configures usage metering (usage.go).
	Metering Metering
	// HostPaths are more of the host's paths (runsc, the guest kernel)
	// that callers must not see in messages (HostPaths).
	HostPaths []string
	// Telemetry gets the Prometheus series' events (telemetry.go); nil:
	// none are recorded.
	Telemetry *telemetry.Metrics
	// Volumes holds the named volumes (volumes.go); nil: none.
	Volumes *volume.Store
	// Audit is the audit trail (audit.go); nil turns it off.
	Audit *audit.Trail
	// Trail writes sandboxes' events and audit entries within each
	// sandbox's budget; nil: the manager opens its own (on Records and
	// Audit) and closes it.
	Trail *sandboxlog.Writer
	// CommitFS keeps a filesystem-only pause's files as an image
	// (pause_fs.go); nil: such pauses are not supported.
	CommitFS CommitFS
}

// DefaultMaxSandboxes is the live-sandbox bound when Config leaves it
// zero.
const DefaultMaxSandboxes = 64

// DefaultMaxStarting is the bound on sandboxes starting at once: twice the
// CPUs, at least 4.
var DefaultMaxStarting = max(4, 2*goruntime.NumCPU())

// Manager is the sandbox manager. Its methods are safe for concurrent use.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	records *records.Store
	host    *handle.Host

	ctx    context.Context // lifetime; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	handles map[string]*handle.Handle // live sandboxes, by id
	// creatingNames holds the names of creates in flight (reserveName).
	creatingNames map[string]bool

	trail    *sandboxlog.Writer
	ownTrail bool         // opened by New: closed by Close
	cas      secretCAs    // live sandboxes' egress CAs (secrets.go)
	secrets  secretSource // where secrets are kept (secretstore.go)
	nfs      nfsServing   // vm sandboxes' volume servers (volumes_nfs.go)
	pools    []*warmPool
	// fillSlot lets one warm pool fill run at a time; foreground counts
	// the callers' creates starting now, which fills wait for.
	fillSlot   chan struct{}
	foreground atomic.Int64
	// starting holds a token per sandbox starting now (MaxStarting).
	starting chan struct{}
	// portConns shares the port connections among sandboxes; portReports
	// rate-limits the refusals' events.
	portConns   *keylimit.Shares
	portReports keylimit.Every
	// snapPending is what snapshots being saved now will take (snapquota.go).
	snapMu      sync.Mutex
	snapPending snapshotsPending

	procs  Processes
	files  Files
	ports  Ports
	snaps  Snapshots
	images Images

	versionsMu sync.Mutex
	versions   map[string]string // runtime name -> version (runtimeVersion)

	sampler *metrics.Sampler // nil: sampling is off
	meter   *meter           // nil: metering is off (usage.go)
}

// New builds a Manager and reconciles the records with what the runtimes
// run.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if err := sandbox.ValidateCACerts("--ca-cert", cfg.CACerts); err != nil {
		return nil, err
	}
	if cfg.MaxSandboxes <= 0 {
		cfg.MaxSandboxes = DefaultMaxSandboxes
	}
	if cfg.AgentTimeout <= 0 {
		cfg.AgentTimeout = 30 * time.Second
	}
	if cfg.MaxStarting <= 0 {
		cfg.MaxStarting = DefaultMaxStarting
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.SecretCASeed) == 0 {
		cfg.SecretCASeed = randomBytes(32)
	}
	if len(cfg.PortKey) == 0 {
		cfg.PortKey = randomBytes(32)
	}
	cfg.Capacity = cfg.Capacity.withDefaults()
	cfg.SnapshotQuota = cfg.SnapshotQuota.withDefaults()
	for _, d := range []string{cfg.sandboxesDir(), cfg.logsDir(), cfg.snapshotsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	pools, err := newPools(cfg.WarmPools)
	if err != nil {
		return nil, err
	}
	portConns, err := cfg.PortConns.shares()
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &Manager{cfg: cfg, log: cfg.Logger, records: cfg.Records, ctx: lctx, cancel: cancel,
		handles: map[string]*handle.Handle{}, creatingNames: map[string]bool{}, versions: map[string]string{}, pools: pools,
		trail: cfg.Trail, fillSlot: make(chan struct{}, 1),
		starting: make(chan struct{}, cfg.MaxStarting), portConns: portConns, portReports: keylimit.Every{Interval: limitReports}}
	if m.trail == nil {
		m.trail = sandboxlog.Open(sandboxlog.Config{Records: cfg.Records, Trail: cfg.Audit, Log: cfg.Logger})
		m.ownTrail = true
	}
	m.host = &handle.Host{Records: cfg.Records, Trail: m.trail, Log: cfg.Logger, Images: cfg.Images,
		AgentTimeout: cfg.AgentTimeout, Lifetime: lctx}
	if n := cfg.Network; n != nil && n.Layer != nil {
		m.host.Network, m.host.ForgetDNS = n.Layer, n.Forget
	}
	m.procs, m.files, m.ports, m.snaps, m.images = Processes{m}, Files{m: m}, Ports{m}, Snapshots{m}, Images{m}
	if m.sampler = m.newSampler(); m.sampler != nil {
		m.wg.Add(1)
		go func() { defer m.wg.Done(); m.sampler.Run(m.ctx) }()
	}
	m.startMetering()
	if err := m.reconcile(ctx); err != nil {
		cancel()
		m.wg.Wait()
		m.closeTrail()
		return nil, fmt.Errorf("reconciling sandboxes: %w", err)
	}
	m.adoptTemplates(ctx)
	m.refill()
	if cfg.Retention.Keep > 0 {
		m.wg.Add(1)
		go m.retain()
	}
	return m, nil
}

// Close stops the manager's background work. Sandboxes keep running; the
// next daemon reconciles and adopts them.
func (m *Manager) Close() {
	m.drainPool()
	m.cancel()
	m.mu.Lock()
	for _, h := range m.handles {
		h.Detach()
	}
	m.mu.Unlock()
	m.wg.Wait()
	m.closeTrail()
}

// closeTrail writes what the trail holds and stops it, when New opened it.
func (m *Manager) closeTrail() {
	if m.ownTrail {
		m.trail.Close()
	}
}

func (c *Config) sandboxesDir() string { return filepath.Join(c.StateDir, "sandboxes") }
func (c *Config) logsDir() string      { return filepath.Join(c.StateDir, "logs") }
func (c *Config) logPath(id string) string {
	return filepath.Join(c.logsDir(), id+".log")
}

// HostPaths lists the host's directories and files that messages to
// callers must not name: the state directory, the base root filesystem,
// the agent binary's directory, the image store and Config.HostPaths, as
// given and with symlinks resolved (errors name either), the state
// directory first.
func (m *Manager) HostPaths() []string {
	paths := append([]string{m.cfg.StateDir, m.cfg.BaseRootFS, filepath.Dir(m.cfg.AgentBinary)}, m.cfg.HostPaths...)
	if m.cfg.Images != nil {
		paths = append(paths, m.cfg.Images.Root())
	}
	for _, p := range paths {
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
			paths = append(paths, real)
		}
	}
	return paths
}

// Processes is the exec service.
func (m *Manager) Processes() *Processes { return &m.procs }

// Files is the file service.
func (m *Manager) Files() *Files { return &m.files }

// Ports is the exposed-port service.
func (m *Manager) Ports() *Ports { return &m.ports }

// Snapshots is the memory snapshot and fork service.
func (m *Manager) Snapshots() *Snapshots { return &m.snaps }

// Images is the image service.
func (m *Manager) Images() *Images { return &m.images }

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
	if !ids.Sandbox(id) {
		return nil, fmt.Errorf("%w: sandbox %q", errdefs.ErrNotFound, id)
	}
	if h := m.lookup(id); h != nil {
		return h.Record(), nil
	}
	return m.records.GetSandbox(ctx, id)
}

// List returns every sandbox record, oldest first, live ones as they are
// now; sandboxes waiting in a warm pool are left out.
func (m *Manager) List(ctx context.Context) ([]*sandbox.Sandbox, error) {
	recs, err := m.records.ListSandboxes(ctx, false)
	if err != nil {
		return nil, err
	}
	out := recs[:0]
	for _, r := range recs {
		if h := m.lookup(r.ID); h != nil {
			r = h.Record()
		}
		if r.Spec.Tags[poolTag] != "" && !r.State.Terminal() {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// Events returns the event log of a sandbox.
func (m *Manager) Events(ctx context.Context, id string, after int64, limit int) ([]records.Event, error) {
	if _, err := m.Get(ctx, id); err != nil {
		return nil, err
	}
	return m.records.Events(ctx, id, after, limit)
}

// event appends to sandbox id's event log within its budget; failures
// are logged.
func (m *Manager) event(id, kind, msg string, fields map[string]string) {
	m.host.Event(id, kind, msg, fields)
}

// milestone appends a state move to sandbox id's event log, whatever its
// budget holds.
func (m *Manager) milestone(id, kind, msg string, fields map[string]string) {
	m.host.Milestone(id, kind, msg, fields)
}

// lookup returns the handle of live sandbox id, or nil.
func (m *Manager) lookup(id string) *handle.Handle {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.handles[id]
}

// live returns the handle of sandbox id: ErrNotFound for an unknown one,
// ErrFailedPrecondition for one that has ended.
func (m *Manager) live(ctx context.Context, id string) (*handle.Handle, error) {
	if !ids.Sandbox(id) {
		return nil, fmt.Errorf("%w: sandbox %q", errdefs.ErrNotFound, id)
	}
	if h := m.lookup(id); h != nil {
		return h, nil
	}
	if _, err := m.records.GetSandbox(ctx, id); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: sandbox %s has ended", errdefs.ErrFailedPrecondition, id)
}

// acquire returns the agent of running sandbox id with its record, and
// counts an operation in flight until release: every service call on a
// sandbox's insides goes through it. A paused sandbox that resumes by
// itself (auto_pause, auto_resume) is resumed first.
func (m *Manager) acquire(ctx context.Context, id string) (*acquired, error) {
	h, err := m.live(ctx, id)
	if err != nil {
		return nil, err
	}
	c, rec, release, err := h.Acquire()
	if err != nil && h.State() == sandbox.Paused && resumesOnCall(h.Record()) {
		rctx, cancel := context.WithTimeout(m.ctx, pauseTimeout)
		_, rerr := m.Resume(rctx, id)
		cancel()
		if c, rec, release, err = h.Acquire(); err != nil && rerr != nil {
			err = rerr
		}
	}
	if err != nil {
		return nil, err
	}
	return &acquired{h: h, agent: c, rec: rec, release: release}, nil
}

// resumesOnCall reports whether a call on the insides of paused sandbox
// rec resumes it: as its spec says, except after a filesystem-only pause,
// which boots it afresh and so waits for an explicit resume.
func resumesOnCall(rec *sandbox.Sandbox) bool {
	return rec.Spec.ResumesOnCall() && rec.PauseKind != sandbox.PauseFilesystem
}

// acquired is a running sandbox's agent, held for one service call.
type acquired struct {
	h       *handle.Handle
	agent   *agentapi.Client
	rec     *sandbox.Sandbox
	release func()
}
