package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"corral/internal/agent"
	"corral/internal/errdefs"
	"corral/internal/runtime"
)

// procRuntime is a runtime.Runtime for the manager's tests: a "sandbox" is
// the real guest agent serving in this process, on a unix socket in the
// sandbox's directory, running commands on the host. It isolates nothing;
// it stands in for the runtime so that the manager's lifecycle (which is
// under test) runs without root. The runtimes themselves are tested with
// real runsc in their own packages.
type procRuntime struct {
	mu        sync.Mutex
	boxes     map[string]*procBox
	failStart error
	destroyed []string
}

type procBox struct {
	srv    *agent.Server
	cancel context.CancelFunc
	done   chan struct{}
	dead   bool
}

var _ runtime.Runtime = (*procRuntime)(nil)

func newProcRuntime() *procRuntime { return &procRuntime{boxes: map[string]*procBox{}} }

func (r *procRuntime) Name() string { return "gvisor" }

func (r *procRuntime) Start(ctx context.Context, p runtime.StartParams) error {
	r.mu.Lock()
	fail := r.failStart
	r.mu.Unlock()
	if fail != nil {
		return fail
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return err
	}
	l, err := net.Listen("unix", filepath.Join(p.Dir, "agent.sock"))
	if err != nil {
		return err
	}
	srv := agent.New(agent.Config{Root: "/"})
	sctx, cancel := context.WithCancel(context.Background())
	box := &procBox{srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(box.done); _ = srv.Serve(sctx, l) }()
	r.mu.Lock()
	r.boxes[p.ID] = box
	r.mu.Unlock()
	return nil
}

func (r *procRuntime) Dial(ctx context.Context, ref runtime.Ref) (net.Conn, error) {
	r.mu.Lock()
	box := r.boxes[ref.ID]
	r.mu.Unlock()
	if box == nil || box.dead {
		return nil, fmt.Errorf("%w: no sandbox %s", errdefs.ErrUnavailable, ref.ID)
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", filepath.Join(ref.Dir, "agent.sock"))
}

func (r *procRuntime) Status(_ context.Context, ref runtime.Ref) (runtime.State, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch box := r.boxes[ref.ID]; {
	case box == nil:
		return runtime.StateAbsent, nil
	case box.dead:
		return runtime.StateStopped, nil
	}
	return runtime.StateRunning, nil
}

// crash kills a sandbox's agent the way an OOM kill would.
func (r *procRuntime) crash(id string) {
	r.mu.Lock()
	box := r.boxes[id]
	box.dead = true
	r.mu.Unlock()
	box.srv.KillAll()
	box.cancel()
	<-box.done
}

func (r *procRuntime) Destroy(_ context.Context, ref runtime.Ref) error {
	r.mu.Lock()
	box := r.boxes[ref.ID]
	delete(r.boxes, ref.ID)
	r.destroyed = append(r.destroyed, ref.ID)
	r.mu.Unlock()
	if box != nil {
		box.srv.KillAll()
		box.cancel()
		<-box.done
	}
	if err := os.RemoveAll(ref.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (r *procRuntime) List(context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.boxes {
		ids = append(ids, id)
	}
	return ids, nil
}

func (r *procRuntime) wasDestroyed(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.destroyed {
		if d == id {
			return true
		}
	}
	return false
}
