// Package daemon assembles `corral serve`: the state directory (its
// owner's alone), the API token, the seal key, the agent binary, the
// store, the runtimes, the manager and the HTTP server. It is the only
// package that imports runtime backends.
package daemon

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/api"
	"corral/internal/build"
	"corral/internal/cluster/node"
	"corral/internal/console"
	"corral/internal/e2b"
	"corral/internal/e2b/envd"
	"corral/internal/errdefs"
	imagestore "corral/internal/image/store"
	"corral/internal/manager"
	"corral/internal/mcp"
	"corral/internal/netpolicy/policy"
	"corral/internal/records"
	"corral/internal/reqid"
	"corral/internal/runtime"
	"corral/internal/runtime/gvisor"
	"corral/internal/runtime/vm"
	"corral/internal/sandbox"
	"corral/internal/sandboxlog"
	"corral/internal/seal"
	"corral/internal/telemetry"
	"corral/internal/volume"
	"corral/internal/websession"
)

// sealKeyFile (in the state directory) is the daemon's own key: it seals
// env values in the records, and port tokens are derived from it
// (portTokenKeyLabel). Losing it loses those env values and changes
// every port token.
const (
	sealKeyFile       = "seal.key"
	portTokenKeyLabel = "port-token"
)

// Config is what `corral serve` is started with.
type Config struct {
	Listen string
	// EnvdListen is the address of the E2B envd face (internal/e2b/envd);
	// empty turns it off.
	EnvdListen string
	// PortsListen is the address of the ports origin (api.PortsHandler):
	// exposed ports for browsers, each under a host of its own,
	// <port>-<id>.<PortsDomain>; empty turns it off (browsers are then
	// refused exposed ports).
	PortsListen string
	// PortsDomain is the domain (with a port, where browsers reach the
	// listener on another than the scheme's) under which PortsListen
	// serves; "": localhost and PortsListen's port.
	PortsDomain string
	// ConsoleHosts are the host names browsers open the console (the API
	// listener) under besides --listen's own, e.g. behind a reverse
	// proxy; the ports domain must share no registrable domain with them
	// or with --listen's (checkPortsParent) unless PortsSharedParentOK.
	ConsoleHosts        []string
	PortsSharedParentOK bool
	// E2BRuntime is the runtime of sandboxes E2B clients create from a
	// template ("": gvisor); E2B's API has no field for it.
	E2BRuntime string
	// EnvdDebugSandbox (a sandbox id or name) is the sandbox the e2b SDK's
	// debug mode (E2B_DEBUG=true, sandbox id "debug_sandbox_id") reaches
	// through the envd face, without an access token; loopback only.
	EnvdDebugSandbox string
	StateDir         string
	RunscPath        string // default <state>/bin/runsc
	BaseRootFS       string // default <state>/rootfs/debian-bookworm
	Platform         string
	VMKernel         string // default <state>/vm/kernel/current
	QEMUPath         string // default: qemu-system-x86_64 on PATH
	VMAccel          string // "kvm", "tcg" or "" (KVM where usable)
	// MaxSandboxes bounds live sandboxes; 0 sizes it from the machine
	// (AutoMaxSandboxes).
	MaxSandboxes int
	// WarmPool is how many started sandboxes of the default spec are kept
	// ready: AutoWarmPool (negative) sizes it from the machine, 0 turns it
	// off.
	WarmPool int
	// WarmPools are more pools, of other specs (manager.ParseWarmPool).
	WarmPools []manager.WarmPoolConfig
	Net       NetConfig
	// MetricsInterval is the time between the samples of each running
	// sandbox's use; 0 turns sampling off.
	MetricsInterval time.Duration
	Version         string
	Logger          *slog.Logger

	// Shares bound what sandboxes may take from one another (shares.go).
	Shares Shares

	// Retention is how long the records, events and entrypoint logs of
	// ended sandboxes are kept; zero keeps them forever.
	Retention time.Duration
	// Metering is usage metering: Off turns it off, Retention keeps ended
	// sandboxes' usage (zero: forever).
	Metering manager.Metering
	// CACerts are PEM CA certificates every sandbox trusts beyond its
	// image's (validated by the caller).
	CACerts []string

	// MetricsListen, when set, serves the Prometheus /metrics there
	// without a token, and not on the API listener (where it otherwise
	// is, behind the token); telemetry.go.
	MetricsListen string
	// SecretUpstreamCA is a PEM file of CAs trusted, beside the system's,
	// for the real certificates of hosts the egress proxy injects secret
	// headers for.
	SecretUpstreamCA string
	// MCPMaxTimeout bounds the lifetime of a sandbox an /mcp session
	// creates (0: mcp.DefaultMaxTimeout).
	MCPMaxTimeout time.Duration
	// AuditOff turns the audit trail off (audit.go); AuditRetention is
	// how long its entries are kept (zero: forever).
	AuditOff       bool
	AuditRetention time.Duration
	// Cluster, when its DB is set, makes this daemon a node of a cluster
	// (cluster.go).
	Cluster node.Config
	// ReadyFile, when set, is written once the daemon serves: the bound
	// addresses as JSON (Ready), so that a caller that gave port 0 learns
	// the ports, and knows the daemon is up.
	ReadyFile string

	// logBudget holds the log lines that name a sandbox to its budget
	// (defaults wraps Logger in it).
	logBudget *sandboxlog.LogBudget
}

// metricsInterval maps the daemon's flag (0: off) to the manager's
// setting (negative: off).
func metricsInterval(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// Run serves until ctx ends. Sandboxes keep running after it returns; the
// next daemon on the same state dir adopts them.
func Run(ctx context.Context, cfg Config) error {
	// The flags are checked before anything binds: a refusal says what
	// is wrong with them, not that a port is taken.
	if err := cfg.defaults(); err != nil {
		return err
	}
	lns, err := listen(&cfg)
	if err != nil {
		return err
	}
	defer lns.close()
	lns.nodeURLs(&cfg.Cluster)
	log := cfg.Logger
	protectFromOOM(log)
	unlock, err := lockState(cfg.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := tightenState(cfg.StateDir); err != nil {
		return err
	}
	token, err := ensureToken(filepath.Join(cfg.StateDir, "token"))
	if err != nil {
		return err
	}
	key, err := seal.Load(filepath.Join(cfg.StateDir, sealKeyFile))
	if err != nil {
		return err
	}
	agentBin, err := installAgent(cfg.StateDir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(cfg.BaseRootFS, "bin/sh")); err != nil {
		return fmt.Errorf("base root filesystem %s is missing or incomplete (run scripts/setup.sh): %w", cfg.BaseRootFS, err)
	}
	st, err := records.Open(ctx, filepath.Join(cfg.StateDir, "corral.db"), key)
	if err != nil {
		return err
	}
	defer st.Close()
	tel := newTelemetry(cfg, st)
	trail, err := openAudit(ctx, cfg, st, log)
	if err != nil {
		return err
	}
	defer trail.Close()
	gv, err := gvisor.New(gvisor.Config{RunscPath: cfg.RunscPath, Root: filepath.Join(cfg.StateDir, "runsc"), Platform: cfg.Platform, Logger: log})
	if err != nil {
		return err
	}
	// Decisions can flow before the manager exists (sandboxes adopted from
	// before a restart); the few made while it reconciles are dropped.
	var record atomic.Pointer[func(policy.Decision)]
	var networking *manager.Networking
	sec, err := newSecretEgress(cfg.SecretUpstreamCA)
	if err != nil {
		return err
	}
	if !cfg.Net.Disabled {
		net, err := startNetwork(ctx, cfg.StateDir, cfg.Net, cfg.Shares, &record, sec, log)
		if err != nil {
			return err
		}
		defer net.close()
		networking = net.networking()
	}
	// Everything a sandbox makes the host keep goes through one writer,
	// within the sandbox's budget (closed before the trail: it writes its
	// last folds there). A denial toward the host's own networks is
	// evidence, as one toward the always-denied ranges is.
	tcfg := sandboxlog.Config{Records: st, Trail: trail, Log: log, Logs: cfg.logBudget}
	if networking != nil {
		tcfg.Protected = networking.Layer.HostNetwork
	}
	sbtrail := sandboxlog.Open(tcfg)
	defer sbtrail.Close()
	images, err := imagestore.Open(filepath.Join(cfg.StateDir, "images"), log)
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	volumes, err := volume.Open(filepath.Join(cfg.StateDir, "volumes"), log)
	if err != nil {
		return err
	}
	runtimes := map[string]runtime.Runtime{"gvisor": gv}
	unavailable := map[string]string{}
	if v, err := vm.New(vm.Config{
		QEMUPath: cfg.QEMUPath, KernelDir: cfg.VMKernel, StateDir: filepath.Join(cfg.StateDir, "vm"),
		AgentBinary: agentBin, Accel: cfg.VMAccel, Logger: log,
	}); err != nil {
		log.Warn("the vm runtime is unavailable", "err", err)
		unavailable["vm"] = err.Error()
	} else {
		runtimes["vm"] = v
	}
	mcfg := manager.Config{
		StateDir: cfg.StateDir, BaseRootFS: cfg.BaseRootFS, AgentBinary: agentBin, Records: st, Logger: log,
		Runtimes: runtimes, Unavailable: unavailable, MaxSandboxes: cfg.MaxSandboxes, WarmPools: warmPools(cfg), Network: networking,
		Images: images, PortKey: key.Derive(portTokenKeyLabel), MetricsInterval: metricsInterval(cfg.MetricsInterval),
		HostPaths: []string{cfg.RunscPath, cfg.VMKernel}, Retention: manager.Retention{Keep: cfg.Retention},
		CACerts: cfg.CACerts, Telemetry: tel, Volumes: volumes, Audit: trail, Trail: sbtrail, Metering: cfg.Metering,
		SecretCASeed: key.Derive(secretCAKeyLabel),
	}
	// The builder keeps filesystem-only pauses' files, and needs the
	// manager: it is bound once both exist (a pause before then, which
	// only a sandbox adopted past its timeout could ask, is refused).
	var builderOnce atomic.Pointer[build.Builder]
	mcfg.CommitFS = func(ctx context.Context, spec sandbox.Spec, export manager.Export) (imagestore.Image, error) {
		b := builderOnce.Load()
		if b == nil {
			return imagestore.Image{}, fmt.Errorf("%w: the daemon is starting", errdefs.ErrUnavailable)
		}
		return b.CommitFS(ctx, spec, export)
	}
	if err := cfg.Shares.manager(&mcfg, cfg.StateDir); err != nil {
		return err
	}
	m, err := manager.New(ctx, mcfg)
	if err != nil {
		return err
	}
	defer m.Close()
	tel.Observe(m.TelemetryState)
	recordFn := m.RecordDecision
	record.Store(&recordFn)
	sec.m.Store(m)
	builder := build.New(build.Config{Manager: m, Store: images, BaseRootFS: cfg.BaseRootFS, Log: log})
	builderOnce.Store(builder)
	// Once more, now that the stores and runtimes made their directories.
	if err := tightenState(cfg.StateDir); err != nil {
		return err
	}
	var envdFace http.Handler
	if cfg.EnvdListen != "" {
		envdFace = envdAudited(trail, envd.Signed(envd.New(m, log), m))
		if cfg.EnvdDebugSandbox != "" {
			envdFace = envd.Debug(envdFace, m, cfg.EnvdDebugSandbox)
		}
		envdFace = reqid.Middleware(envdFace, log)
	}
	var nodeTLS *tls.Config
	var nd *node.Node
	if cfg.Cluster.DB != "" {
		if nd, err = joinCluster(ctx, cfg, m, token, trail); err != nil {
			return err
		}
		defer nd.Close()
		nodeTLS = nd.ServerTLS()
	}
	h, portsFace := handler(m, builder, token, cfg, nodeTLS != nil, calls{trail, sbtrail}, log, tel)
	if nd != nil {
		h = nd.Handler(h)
	}
	return serve(ctx, cfg, lns, nodeTLS, h, envdFace, portsFace, metricsFace(cfg, tel))
}

// handler is the API listener's: the native API, E2B's control API under
// /e2b (its key is e2b_ and the same token), MCP's streamable HTTP at
// /mcp (the same token as a bearer; its tools call the native API in
// process), the web console at / and /console/ (its session cookie also
// authorises the native API), and /metrics behind the token unless --metrics-listen moves
// it; every request gets an id (reqid). The second handler is the ports
// origin's (nil when --ports-listen is off).
func handler(m *manager.Manager, b *build.Builder, token string, cfg Config, secure bool, trail calls, log *slog.Logger, tel *telemetry.Metrics) (http.Handler, http.Handler) {
	version := cfg.Version
	mux := http.NewServeMux()
	mux.Handle("/e2b/", e2bAudited(trail.recorder(), http.StripPrefix("/e2b", e2b.New(e2b.Config{Manager: m, Builder: b, Token: token, Runtime: cfg.E2BRuntime, Log: log}))))
	native := api.New(m, b, token, version, log)
	native.SetAudit(trail.trail, trail.recorder())
	var ports http.Handler
	// A cluster node serves no browser (its links are TLS pinned for the
	// control planes): browsers reach ports through a control plane's
	// envd face, by host.
	if cfg.PortsListen != "" && cfg.Cluster.DB == "" {
		scheme := "http"
		if secure {
			scheme = "https"
		}
		native.SetPortsOrigin(api.PortsOrigin{Scheme: scheme, Domain: cfg.PortsDomain})
		ports = reqid.Middleware(native.PortsHandler(cfg.PortsDomain), log)
	}
	sessions := websession.New(token)
	native.AcceptSessions(sessions)
	con := console.New(sessions, version, log)
	mux.Handle("GET /{$}", con)
	mux.Handle("/console/", con)
	mux.Handle("/mcp", mcp.HTTPHandler(mcp.InProcessClient(native, token), mcp.Options{Version: version, MaxTimeout: cfg.MCPMaxTimeout}, token))
	mux.Handle("/", native)
	if cfg.MetricsListen == "" {
		mux.Handle("GET /metrics", native.Protect(tel.Handler()))
	}
	return reqid.Middleware(mux, log), ports
}

func (cfg *Config) defaults() error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// A line logged with a request's context names the request; one that
	// names a sandbox is held to that sandbox's log budget.
	cfg.logBudget = sandboxlog.NewLogBudget(reqid.NewHandler(cfg.Logger.Handler()))
	cfg.Logger = slog.New(cfg.logBudget)
	if !filepath.IsAbs(cfg.StateDir) {
		return fmt.Errorf("--state-dir %q must be an absolute path", cfg.StateDir)
	}
	if err := cfg.portsDefaults(); err != nil {
		return err
	}
	if cfg.EnvdDebugSandbox != "" && !envd.DebugListenOK(cfg.EnvdListen) {
		return fmt.Errorf("--envd-debug-sandbox needs --envd-listen on a loopback address (it drops the access token), not %q", cfg.EnvdListen)
	}
	if cfg.E2BRuntime != "" && !slices.Contains(sandbox.Runtimes, cfg.E2BRuntime) {
		return fmt.Errorf("--e2b-runtime %q: want one of %s", cfg.E2BRuntime, strings.Join(sandbox.Runtimes, ", "))
	}
	if cfg.Retention < 0 {
		return fmt.Errorf("--retention %s: must be 0 (keep forever) or more", cfg.Retention)
	}
	if cfg.MCPMaxTimeout < 0 || cfg.MCPMaxTimeout > sandbox.MaxTimeout {
		return fmt.Errorf("--mcp-max-timeout %s: must be between 0 (the default, %s) and %s", cfg.MCPMaxTimeout, mcp.DefaultMaxTimeout, sandbox.MaxTimeout)
	}
	if cfg.Metering.Retention < 0 {
		return fmt.Errorf("--usage-retention %s: must be 0 (keep forever) or more", cfg.Metering.Retention)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("creating state dir: %w", err)
	}
	if cfg.RunscPath == "" {
		cfg.RunscPath = filepath.Join(cfg.StateDir, "bin", "runsc")
	}
	if cfg.BaseRootFS == "" {
		cfg.BaseRootFS = filepath.Join(cfg.StateDir, "rootfs", "debian-bookworm")
	}
	if cfg.VMKernel == "" {
		cfg.VMKernel = filepath.Join(cfg.StateDir, "vm", "kernel", "current")
	}
	if cfg.MaxSandboxes <= 0 {
		n, err := AutoMaxSandboxes()
		if err != nil {
			return fmt.Errorf("sizing --max-sandboxes from the machine: %w", err)
		}
		cfg.MaxSandboxes = n
		cfg.Logger.Info("live sandboxes bounded by the machine", "op", "init", "max_sandboxes", n)
	}
	return cfg.Shares.sized()
}

// serve serves the API on cfg.Listen and, when envdFace is not nil, the
// E2B envd face on cfg.EnvdListen, until ctx ends or either fails. A
// cluster node serves both over TLS only (nodeTLS; the metrics listener
// stays plain HTTP).
func serve(ctx context.Context, cfg Config, l *listeners, nodeTLS *tls.Config, h, envdFace, portsFace, metricsFace http.Handler) error {
	srvs := []*http.Server{newServer(h)}
	lns := []net.Listener{tlsListener(l.api, nodeTLS)}
	if envdFace != nil {
		srvs, lns = append(srvs, newServer(envdFace)), append(lns, tlsListener(l.envd, nodeTLS))
		cfg.Logger.Info("corral envd face serving", "listen", cfg.EnvdListen)
	}
	if portsFace != nil {
		srvs, lns = append(srvs, newServer(portsFace)), append(lns, tlsListener(l.ports, nodeTLS))
		cfg.Logger.Info("corral ports origin serving", "listen", cfg.PortsListen, "domain", cfg.PortsDomain)
	} else if l.ports != nil {
		l.ports.Close() // a cluster node serves no ports origin
		cfg.PortsListen, cfg.PortsDomain = "", ""
	}
	if metricsFace != nil {
		srvs, lns = append(srvs, newServer(metricsFace)), append(lns, l.metrics)
		cfg.Logger.Info("corral metrics serving", "listen", cfg.MetricsListen)
	}
	errc := make(chan error, len(srvs))
	for i, srv := range srvs {
		go func() { errc <- srv.Serve(lns[i]) }()
	}
	cfg.Logger.Info("corral daemon serving", "listen", cfg.Listen, "state_dir", cfg.StateDir, "version", cfg.Version)
	if cfg.ReadyFile != "" {
		if err := writeReady(cfg.ReadyFile, cfg); err != nil {
			for _, srv := range srvs {
				srv.Close()
			}
			return err
		}
	}
	select {
	case err := <-errc:
		for _, srv := range srvs {
			srv.Close()
		}
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range srvs {
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
	}
	return nil
}

func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
}

// lockState takes an exclusive lock so two daemons never share a state dir.
func lockState(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "daemon.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another corral daemon is using %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// ensureToken returns the API token, creating it (mode 0600) on first start.
func ensureToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if tok := strings.TrimSpace(string(b)); tok != "" {
			return tok, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading token: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(raw[:])
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("writing token: %w", err)
	}
	return tok, nil
}

// AutoWarmPool as Config.WarmPool sizes the default pool from the machine
// (AutoWarmPoolSize).
const AutoWarmPool = -1

// AutoWarmPoolSize is the default pool's size when the operator names
// none: one sandbox per CPU, 1 to 8. A pooled gVisor sandbox holds some
// tens of MiB of host memory and no CPU while it waits (docs/BENCHMARKS.md,
// Density), and refills run one at a time behind callers' creates, so this
// costs little and covers a burst of as many creates as the machine can
// start at once.
func AutoWarmPoolSize() int { return min(max(goruntime.NumCPU(), 1), 8) }

// warmPools is the default spec's pool (--warm-pool) and the others. The
// sized-from-the-machine default gives way to a --warm-pool-spec of the
// same spec.
func warmPools(cfg Config) []manager.WarmPoolConfig {
	var out []manager.WarmPoolConfig
	switch {
	case cfg.WarmPool > 0:
		out = append(out, manager.WarmPoolConfig{Size: cfg.WarmPool})
	case cfg.WarmPool < 0:
		out = append(out, manager.WarmPoolConfig{Size: AutoWarmPoolSize(), Auto: true})
	}
	return append(out, cfg.WarmPools...)
}
