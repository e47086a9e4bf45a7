// Package inproc is a runtime.Runtime for the tests of the layers above
// the runtime (the manager, the API): a "sandbox" is the real guest agent
// serving in the test's own process, on a unix socket in the sandbox's
// directory, running commands on the host as the test's user. It isolates
// nothing and must never be wired into a daemon (test/deps checks that);
// the real runtimes are tested with real runsc and QEMU in their own
// packages.
//
// Each sandbox's agent resolves file paths in a private root,
// <dir>/root, which starts with the /etc/passwd and /etc/group of the
// start's RootFS; processes run the host's binaries with their working
// directory inside that root.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"corral/internal/agent"
	"corral/internal/errdefs"
	"corral/internal/runtime"
)

// Runtime is the in-process runtime. The zero value is not usable; call
// New.
type Runtime struct {
	name string

	mu        sync.Mutex
	boxes     map[string]*box
	failStart error
	destroyed []string
	protocols []int // served by agents started from now on; nil: all
}

type box struct {
	srv    *agent.Server
	cancel context.CancelFunc
	done   chan struct{}
	dead   bool

	silenced chan struct{} // closed by Silence
	hijacked atomic.Bool   // set by Hijack
	conns    []net.Conn    // every connection Dial made (Drop closes them)
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a runtime that answers to name ("gvisor" for the manager's
// default).
func New(name string) *Runtime { return &Runtime{name: name, boxes: map[string]*box{}} }

// Name is the runtime's API name.
func (r *Runtime) Name() string { return r.name }

// FailStarts makes every Start fail with err (nil: start again).
func (r *Runtime) FailStarts(err error) {
	r.mu.Lock()
	r.failStart = err
	r.mu.Unlock()
}

// AgentProtocols makes the agents of sandboxes started from now on serve
// only these protocol versions (none: all), standing for an agent frozen
// in an older image or memory snapshot.
func (r *Runtime) AgentProtocols(versions ...int) {
	r.mu.Lock()
	r.protocols = versions
	r.mu.Unlock()
}

// Start serves an agent for the sandbox.
func (r *Runtime) Start(ctx context.Context, p runtime.StartParams) error {
	if err := p.Ref.Check(); err != nil {
		return err
	}
	r.mu.Lock()
	fail, protocols := r.failStart, r.protocols
	r.mu.Unlock()
	if fail != nil {
		return fail
	}
	root := filepath.Join(p.Dir, "root")
	if err := seedRoot(root, p.RootFS); err != nil {
		return err
	}
	l, err := net.Listen("unix", filepath.Join(p.Dir, "agent.sock"))
	if err != nil {
		return err
	}
	srv := agent.New(agent.Config{Root: root, Protocols: protocols})
	sctx, cancel := context.WithCancel(context.Background())
	b := &box{srv: srv, cancel: cancel, done: make(chan struct{}), silenced: make(chan struct{})}
	go func() { defer close(b.done); _ = srv.Serve(sctx, l) }()
	r.mu.Lock()
	r.boxes[p.ID] = b
	r.mu.Unlock()
	return nil
}

// seedRoot makes root with the user database of rootfs (when it has one).
func seedRoot(root, rootfs string) error {
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		return err
	}
	for _, f := range []string{"etc/passwd", "etc/group"} {
		b, err := os.ReadFile(filepath.Join(rootfs, f))
		if errors.Is(err, os.ErrNotExist) || rootfs == "" {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Dial connects to the sandbox's agent.
func (r *Runtime) Dial(ctx context.Context, ref runtime.Ref) (net.Conn, error) {
	r.mu.Lock()
	b := r.boxes[ref.ID]
	r.mu.Unlock()
	if b == nil || b.dead {
		return nil, fmt.Errorf("%w: no sandbox %s", errdefs.ErrUnavailable, ref.ID)
	}
	if b.hijacked.Load() {
		return impostor()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", filepath.Join(ref.Dir, "agent.sock"))
	if err != nil {
		return nil, err
	}
	bc := &boxConn{Conn: c, b: b, closed: make(chan struct{})}
	r.mu.Lock()
	b.conns = append(b.conns, bc)
	r.mu.Unlock()
	return bc, nil
}

// Status reports running, stopped (crashed) or absent.
func (r *Runtime) Status(_ context.Context, ref runtime.Ref) (runtime.State, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch b := r.boxes[ref.ID]; {
	case b == nil:
		return runtime.StateAbsent, nil
	case b.dead:
		return runtime.StateStopped, nil
	}
	return runtime.StateRunning, nil
}

// Crash kills a sandbox's agent and processes the way an OOM kill would:
// the runtime still knows it, stopped.
func (r *Runtime) Crash(id string) {
	r.mu.Lock()
	b := r.boxes[id]
	b.dead = true
	r.mu.Unlock()
	b.srv.KillAll()
	b.cancel()
	<-b.done
}

// Destroy kills the agent and its processes and removes the directory.
func (r *Runtime) Destroy(_ context.Context, ref runtime.Ref) error {
	if err := ref.Check(); err != nil {
		return err
	}
	r.mu.Lock()
	b := r.boxes[ref.ID]
	delete(r.boxes, ref.ID)
	r.destroyed = append(r.destroyed, ref.ID)
	r.mu.Unlock()
	if b != nil {
		b.srv.KillAll()
		b.cancel()
		<-b.done
	}
	if err := os.RemoveAll(ref.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// List returns the sandboxes the runtime serves.
func (r *Runtime) List(context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.boxes {
		ids = append(ids, id)
	}
	return ids, nil
}

// Destroyed reports whether Destroy was called for id.
func (r *Runtime) Destroyed(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.destroyed, id)
}
