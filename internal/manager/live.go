package manager

import (
	"fmt"
	"sync"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// live is the in-memory side of a sandbox that is not terminal yet.
type live struct {
	rt  runtime.Runtime
	ref runtime.Ref

	// op serialises lifecycle operations (create, terminate) on this sandbox.
	op sync.Mutex

	mu         sync.Mutex
	sb         sandbox.Sandbox
	client     *agentapi.Client
	active     int       // API operations in flight (exec streams, file calls)
	lastActive time.Time // end of the last operation
	stop       chan struct{}
	pooled     bool              // started for the warm pool, not handed out yet
	saving     bool              // a memory snapshot ended the agent session on purpose
	from       *sandbox.Snapshot // the memory snapshot it starts from; nil on a cold start
	done       chan struct{}     // closed once the sandbox is terminal
}

func newLive(sb *sandbox.Sandbox, rt runtime.Runtime) *live {
	return &live{
		rt:         rt,
		ref:        runtime.Ref{ID: sb.ID, Dir: sb.Dir},
		sb:         *sb,
		lastActive: time.Now(),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
}

// snapshot returns a copy of the record.
func (l *live) snapshot() *sandbox.Sandbox {
	l.mu.Lock()
	defer l.mu.Unlock()
	sb := l.sb
	return &sb
}

// state returns the current state.
func (l *live) state() sandbox.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sb.State
}

// move changes the state if the state machine allows it, applying edit to
// the record under the same lock, and returns the new record.
func (l *live) move(to sandbox.State, edit func(*sandbox.Sandbox)) (*sandbox.Sandbox, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := sandbox.Move(l.sb.State, to); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", l.sb.ID, err)
	}
	l.sb.State = to
	if edit != nil {
		edit(&l.sb)
	}
	sb := l.sb
	return &sb, nil
}

// acquire returns the agent client of a running sandbox and counts an
// operation in flight until release.
func (l *live) acquire() (*agentapi.Client, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sb.State != sandbox.Running || l.client == nil {
		return nil, nil, fmt.Errorf("%w: sandbox %s is %s", errdefs.ErrFailedPrecondition, l.sb.ID, l.sb.State)
	}
	l.active++
	l.lastActive = time.Now()
	var once sync.Once
	return l.client, func() {
		once.Do(func() {
			l.mu.Lock()
			l.active--
			l.lastActive = time.Now()
			l.mu.Unlock()
		})
	}, nil
}

// idleFor reports how long the sandbox has had no operation in flight.
func (l *live) idleFor(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active > 0 {
		return 0
	}
	return now.Sub(l.lastActive)
}

// detached reports whether detach was called.
func (l *live) detached() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// detach stops the background watchers without touching the sandbox (the
// daemon is shutting down; the next one adopts the sandbox).
func (l *live) detach() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	if l.client != nil {
		l.client.Close()
	}
}
