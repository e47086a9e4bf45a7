// Package gvisor is the runsc (gVisor) backend of runtime.Runtime.
//
// Each sandbox is one runsc container in its own runsc sandbox, started
// from an OCI bundle this package writes into the sandbox's directory. The
// image's root filesystem is shared read-only between sandboxes; each gets
// a private writable layer (runsc's --overlay2 backed by a file under
// <dir>/upper) that Destroy discards. The guest agent is bind-mounted from
// the host and talks to the daemon over a unix socket that runsc lets the
// guest create in a host directory (--host-uds=create). A root filesystem
// must carry the mount points for those binds (PrepareRootFS) so that no
// runsc step writes to it.
//
// Layout of a sandbox directory (runtime.Ref.Dir), owned by this package:
//
//	bundle/config.json  the OCI spec
//	upper/              backing store of the private writable layer
//	chan/agent.sock     the agent's socket (guest: /.corral/run/agent.sock),
//	                    on a bounded tmpfs (bounds.go)
//	log/console.log     stdout/stderr of PID 1 and of runsc run, on a
//	                    bounded tmpfs, rotated by RotateLogs
//	network             runsc --network mode ("none" or "sandbox")
//	overlay             runsc --overlay2 of the sandbox (create and restore)
//	checkpoint/         runsc's image of the sandbox while paused
//	paused              present while paused
//	relisten            the agent released its socket for a checkpoint
//	runsc.log           runsc's debug log (Config.Debug only)
//
// This package imports the runtime contract, errdefs, cleanup, cgroups and
// boundfs; never the daemon, the store or the API.
package gvisor

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"corral/internal/errdefs"
	"corral/internal/runtime"
)

// Config configures the runsc backend.
type Config struct {
	// RunscPath is the runsc binary (built with CGO_ENABLED=0).
	RunscPath string
	// Root is runsc's --root: its state directory, shared by every sandbox
	// of this daemon (e.g. <state>/runsc). runsc pins a "null" network
	// namespace there with a bind mount; whoever removes Root must unmount it.
	Root string
	// Platform is runsc's --platform; default "systrap".
	Platform string
	// CgroupParent is the cgroup under which each sandbox gets
	// <CgroupParent>/<id>; default "/corral".
	CgroupParent string
	// Debug makes runsc write its debug log to <dir>/runsc.log.
	Debug bool
	// Logger receives the backend's logs; default slog.Default().
	Logger *slog.Logger
}

// Timeouts of single runsc invocations. They bound a wedged runsc; the
// caller's context may end them sooner.
const (
	createTimeout  = 60 * time.Second
	commandTimeout = 20 * time.Second
)

// Runtime is the gVisor backend. It keeps no per-sandbox state in memory:
// everything is found again from a runtime.Ref and runsc's root, so one
// Runtime can pick up sandboxes started before a daemon restart.
type Runtime struct {
	cfg Config
	log *slog.Logger
	// startTimeout bounds one runsc run or restore: createTimeout (a test
	// shortens it).
	startTimeout time.Duration
}

var _ runtime.Runtime = (*Runtime)(nil)

// New checks cfg, fills in defaults and creates cfg.Root.
func New(cfg Config) (*Runtime, error) {
	if cfg.RunscPath == "" {
		return nil, errdefs.Invalid("RunscPath", "required")
	}
	if fi, err := os.Stat(cfg.RunscPath); err != nil {
		return nil, fmt.Errorf("gvisor: runsc: %w", err)
	} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return nil, errdefs.Invalid("RunscPath", "%s is not an executable file", cfg.RunscPath)
	}
	if !filepath.IsAbs(cfg.Root) {
		return nil, errdefs.Invalid("Root", "%q is not an absolute path", cfg.Root)
	}
	if cfg.Platform == "" {
		cfg.Platform = "systrap"
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "/corral"
	}
	if !strings.HasPrefix(cfg.CgroupParent, "/") || strings.Contains(cfg.CgroupParent, "..") {
		return nil, errdefs.Invalid("CgroupParent", "%q is not an absolute cgroup path", cfg.CgroupParent)
	}
	cfg.CgroupParent = filepath.Clean(cfg.CgroupParent)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Root, 0o700); err != nil {
		return nil, fmt.Errorf("gvisor: creating runsc root: %w", err)
	}
	return &Runtime{cfg: cfg, log: cfg.Logger.With("runtime", "gvisor"), startTimeout: createTimeout}, nil
}

// Name returns "gvisor".
func (r *Runtime) Name() string { return "gvisor" }

// Version reports runsc's version and the gVisor module it was built from
// (release builds from the module proxy say VERSION_MISSING otherwise).
func (r *Runtime) Version(ctx context.Context) (string, error) {
	out, err := r.runsc(ctx, commandTimeout, "", "--version")
	if err != nil {
		return "", fmt.Errorf("gvisor version: %w", err)
	}
	var parts []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, strings.TrimPrefix(l, "runsc version "))
		}
	}
	if bi, err := buildinfo.ReadFile(r.cfg.RunscPath); err == nil && bi.Main.Version != "" {
		parts = append(parts, bi.Main.Path+" "+bi.Main.Version)
	}
	return strings.Join(parts, ", "), nil
}

// cgroup is the sandbox's cgroup path (the OCI cgroupsPath).
func (r *Runtime) cgroup(id string) string {
	return filepath.Join(r.cfg.CgroupParent, id)
}

// globalFlags are the runsc flags every invocation for a sandbox gets, so
// that create and the commands after it agree. The network mode is the one
// recorded at Start (networkFlag).
func (r *Runtime) globalFlags(dir string) []string {
	network := "none"
	if dir != "" {
		if b, err := os.ReadFile(filepath.Join(dir, networkFile)); err == nil && string(b) == "sandbox" {
			network = "sandbox"
		}
	}
	f := []string{
		"--root", r.cfg.Root,
		"--platform", r.cfg.Platform,
		"--network", network,
		"--host-uds", "create",
		// The guest's setuid binaries work (sudo, as E2B's template
		// gives its user): the IDs they raise are gVisor's emulated ones.
		"--allow-suid",
	}
	if r.cfg.Debug && dir != "" {
		f = append(f, "--debug", "--debug-log", filepath.Join(dir, "runsc.log"))
	}
	return f
}

// command builds a runsc invocation: global flags for the sandbox whose
// directory is dir (none when dir is ""), then args.
func (r *Runtime) command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.cfg.RunscPath, append(r.globalFlags(dir), args...)...)
	cmd.Stdin = nil
	// runsc's children may inherit its output; never wait on them forever.
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// runsc runs one short runsc command and returns its stdout; on failure the
// error carries runsc's stderr.
func (r *Runtime) runsc(ctx context.Context, timeout time.Duration, dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := r.command(ctx, dir, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), runscError(ctx, args, stderr.Bytes(), err)
	}
	return stdout.Bytes(), nil
}

// runscError formats a failed runsc command: "runsc create: <stderr>: <err>".
func runscError(ctx context.Context, args []string, stderr []byte, err error) error {
	name := "runsc"
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			name += " " + a
			break
		}
	}
	err = withCtxErr(ctx, err)
	if msg := lastLines(stderr, 5); msg != "" {
		return fmt.Errorf("%s: %s: %w", name, msg, err)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// withCtxErr adds ctx's error to err, when ctx ended and err does not say so
// already ("signal: killed" alone hides that a deadline passed).
func withCtxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// lastLines returns up to n trailing non-empty lines of b, joined by "; ".
func lastLines(b []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, "; ")
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

// known reports whether runsc has state for id under its root. A lock file
// alone (runsc create killed early) does not count.
func (r *Runtime) known(id string) (bool, error) {
	m, err := filepath.Glob(filepath.Join(r.cfg.Root, id+"_sandbox:*.state"))
	if err != nil {
		return false, fmt.Errorf("listing runsc state: %w", err)
	}
	return len(m) > 0, nil
}

// stateFiles lists runsc's files for id's container in its root.
func (r *Runtime) stateFiles(id string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(r.cfg.Root, id+"_sandbox:*"))
	if err != nil {
		return nil, fmt.Errorf("listing runsc state: %w", err)
	}
	return m, nil
}
