// Package handle owns one live sandbox on the manager's behalf: its
// lifecycle lock, its record (every state change goes through the state
// machine in internal/sandbox and is persisted here, with its event, in one
// write), its agent connection, its activity (what idle timeouts measure)
// and its teardown: the one sequence that removes every host resource a
// sandbox had, used alike by terminate, the rollback of a failed create,
// reconcile after a restart and crash handling.
//
// Nothing outside the manager sees a Handle; the API gets copies of records
// and calls the manager's services, which act through handles.
//
// It imports contracts (sandbox, runtime, agentapi, records) and the owners
// of what a teardown releases (netpolicy, the image store); never a runtime
// backend, the manager itself or the API.
package handle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/records"
	"corral/internal/runtime"
	"corral/internal/sandbox"
	"corral/internal/sandboxlog"
)

// Handle is one live (not yet terminal) sandbox. Its methods are safe for
// concurrent use; the ones that change the lifecycle say that the caller
// holds Lock.
type Handle struct {
	rt   runtime.Runtime
	ref  runtime.Ref
	host *Host

	// op serialises lifecycle operations (create, terminate, pause,
	// resume, snapshot, claim, policy changes).
	op sync.Mutex

	mu         sync.Mutex
	rec        sandbox.Sandbox
	agent      *agentapi.Client
	active     int       // API operations in flight
	lastActive time.Time // end of the last one
	quiet      bool      // the agent session was ended on purpose: its loss is no crash
	watched    bool      // the manager watches it (not a sandbox waiting in a pool)
	stop       chan struct{}
	done       chan struct{}
	// lifetime is signalled when the record's lifetime changed, so the
	// watcher re-arms its timer.
	lifetime chan struct{}
	// endDetail, when set, is the record's Error once it terminates: why
	// it ended, in words (an end cause's detail).
	endDetail string
	// oomKills is the runtime's OOM kill count last seen, lastOOM when it
	// last grew.
	oomKills uint64
	lastOOM  time.Time
}

// New returns the handle of the sandbox rec on rt.
func New(rec *sandbox.Sandbox, rt runtime.Runtime, host *Host) *Handle {
	return &Handle{
		rt: rt, ref: runtime.Ref{ID: rec.ID, Dir: rec.Dir}, host: host, rec: *rec,
		lastActive: time.Now(), stop: make(chan struct{}), done: make(chan struct{}), lifetime: make(chan struct{}, 1),
	}
}

// SetEndDetail makes detail the record's Error when the sandbox
// terminates (unless it already has one): why it ended, in words.
func (h *Handle) SetEndDetail(detail string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endDetail = detail
}

// SawOOMKills records the runtime's OOM kill count (which only grows)
// seen at now, and returns by how much it grew since the last one seen.
func (h *Handle) SawOOMKills(kills uint64, now time.Time) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if kills <= h.oomKills {
		return 0
	}
	grew := kills - h.oomKills
	h.oomKills, h.lastOOM = kills, now
	return grew
}

// LastOOM is when the OOM kill count last grew (zero: never).
func (h *Handle) LastOOM() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastOOM
}

// ID is the sandbox's id.
func (h *Handle) ID() string { return h.ref.ID }

// Ref names the sandbox to its runtime.
func (h *Handle) Ref() runtime.Ref { return h.ref }

// Runtime is the sandbox's runtime.
func (h *Handle) Runtime() runtime.Runtime { return h.rt }

// Lock takes the lifecycle lock; Unlock releases it.
func (h *Handle) Lock()   { h.op.Lock() }
func (h *Handle) Unlock() { h.op.Unlock() }

// Record returns a copy of the sandbox's record.
func (h *Handle) Record() *sandbox.Sandbox {
	h.mu.Lock()
	defer h.mu.Unlock()
	rec := h.rec
	return &rec
}

// Name is the sandbox's name ("" when it has none).
func (h *Handle) Name() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rec.Spec.Name
}

// LifetimeChanged tells the watcher that the record's lifetime changed
// (it re-reads ExpiresAt). A change while nothing watches is harmless: a
// watcher reads the record when it starts.
func (h *Handle) LifetimeChanged() {
	select {
	case h.lifetime <- struct{}{}:
	default:
	}
}

// Lifetime is signalled after LifetimeChanged.
func (h *Handle) Lifetime() <-chan struct{} { return h.lifetime }

// State is the sandbox's current state.
func (h *Handle) State() sandbox.State {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rec.State
}

// Edit changes the record in memory only: what a create learns before
// its first persisted change (the image's digest and defaults).
func (h *Handle) Edit(edit func(*sandbox.Sandbox)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	edit(&h.rec)
}

// Change is one change of a record: a state move (To empty: the state
// stays), an edit of other fields, and an event logged in the same write.
type Change struct {
	To    sandbox.State
	Edit  func(*sandbox.Sandbox)
	Event *Event
}

// Event is an entry for the sandbox's event log.
type Event struct {
	Kind, Message string
	Fields        map[string]string
}

// Apply makes c durable, then visible: an illegal move is refused
// (failed_precondition) and a failed write changes nothing. The caller
// holds Lock, so no other change interleaves between the copy and its
// commit.
func (h *Handle) Apply(ctx context.Context, c Change) (*sandbox.Sandbox, error) {
	next := h.Record()
	if c.To != "" {
		if err := sandbox.Move(next.State, c.To); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", next.ID, err)
		}
		next.State = c.To
	}
	if c.Edit != nil {
		c.Edit(next)
	}
	var evs []records.Event
	var msg string
	var fields map[string]string
	if c.Event != nil {
		msg, fields = sandboxlog.Cap(c.Event.Message, c.Event.Fields)
		evs = append(evs, records.Event{Kind: c.Event.Kind, Message: msg, Fields: fields})
	}
	if err := h.host.Records.PutSandbox(ctx, next, evs...); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.rec = *next
	h.mu.Unlock()
	if c.Event != nil {
		h.host.Trail.Committed(ctx, next.ID, c.Event.Kind, msg, fields)
	}
	return next, nil
}

// Event appends to the sandbox's event log within its budget (Host.Event).
func (h *Handle) Event(kind, msg string, fields map[string]string) {
	h.host.Event(h.ref.ID, kind, msg, fields)
}

// Milestone appends a state move to the sandbox's event log, whatever its
// budget holds (Host.Milestone).
func (h *Handle) Milestone(kind, msg string, fields map[string]string) {
	h.host.Milestone(h.ref.ID, kind, msg, fields)
}

// Acquire returns the agent of a running sandbox and its record, counting
// an operation in flight (the sandbox is not idle) until release, which
// may be called more than once.
func (h *Handle) Acquire() (*agentapi.Client, *sandbox.Sandbox, func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rec.State != sandbox.Running || h.agent == nil {
		return nil, nil, nil, fmt.Errorf("%w: sandbox %s is %s", errdefs.ErrFailedPrecondition, h.rec.ID, h.rec.State)
	}
	h.active++
	h.lastActive = time.Now()
	rec := h.rec
	var once sync.Once
	return h.agent, &rec, func() {
		once.Do(func() {
			h.mu.Lock()
			h.active--
			h.lastActive = time.Now()
			h.mu.Unlock()
		})
	}, nil
}

// IdleFor is how long the sandbox has had no operation in flight.
func (h *Handle) IdleFor(now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.active > 0 {
		return 0
	}
	return now.Sub(h.lastActive)
}

// Touch restarts the idle clock (a claim, a resume).
func (h *Handle) Touch() {
	h.mu.Lock()
	h.lastActive = time.Now()
	h.mu.Unlock()
}

// Stopped is closed once Detach was called: the watchers stop.
func (h *Handle) Stopped() <-chan struct{} { return h.stop }

// Detached reports whether Detach was called.
func (h *Handle) Detached() bool {
	select {
	case <-h.stop:
		return true
	default:
		return false
	}
}

// Detach stops the watchers and closes the agent connection without
// touching the sandbox (the daemon stops and the next one adopts it, or a
// teardown follows).
func (h *Handle) Detach() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	if h.agent != nil {
		h.agent.Close()
	}
}

// Done is closed once the sandbox is terminal (or its handle given up).
func (h *Handle) Done() <-chan struct{} { return h.done }

// finish closes Done, once.
func (h *Handle) finish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.done:
	default:
		close(h.done)
	}
}
