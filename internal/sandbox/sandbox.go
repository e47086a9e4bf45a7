package sandbox

import "time"

// End reasons, recorded when a sandbox terminates, with the exit code wait
// reports for each.
const (
	EndExited      = "exited"       // the entrypoint exited: its exit code
	EndTimeout     = "timeout"      // lifetime reached: 124
	EndIdleTimeout = "idle_timeout" // idle too long: 124
	EndTerminated  = "terminated"   // terminated through the API: 137
	EndCrashed     = "crashed"      // PID 1 or the agent died: 137
	EndLost        = "lost"         // not recoverable after a daemon restart: 137
	EndFailed      = "failed"       // creation failed
	// EndAgentChannelLost: the sandbox still ran, but its agent channel
	// was hijacked or silenced from inside (a socket replaced, an agent
	// stopped or answering wrongly): 137.
	EndAgentChannelLost = "agent_channel_lost"
	// The sandbox ended by itself, for a cause its runtime named (what
	// would otherwise be EndCrashed): 137.
	EndOOM      = "oom"      // out of memory: the host or guest kernel killed it
	EndPanic    = "panic"    // the vm's guest kernel panicked
	EndPowerOff = "poweroff" // the vm's guest powered itself off (or rebooted)
)

// ExitCodeFor is the exit code wait reports for an end reason when there is
// no entrypoint exit code.
func ExitCodeFor(reason string) int {
	switch reason {
	case EndTimeout, EndIdleTimeout:
		return 124
	case EndFailed:
		return 1
	default:
		return 137
	}
}

// Sandbox is the durable record of one sandbox.
type Sandbox struct {
	ID           string
	Spec         Spec
	State        State
	CreatedAt    time.Time
	StartedAt    time.Time // zero until running
	EndedAt      time.Time // zero until terminal
	ExitCode     *int
	EndReason    string
	Error        string
	AgentVersion string
	// PausedAt is when the current pause began (zero unless paused);
	// PausedFor is the time spent paused before it. Paused time does not
	// count against the lifetime timeout.
	PausedAt  time.Time
	PausedFor time.Duration
	// PauseKind is how the sandbox is paused (PauseMemory or
	// PauseFilesystem); empty unless paused.
	PauseKind string
	// FSImage is the image the sandbox's last filesystem-only pause saved
	// its root filesystem to, which it runs on since (Spec.Image names
	// it then): the sandbox's own, removed when it ends or is saved again,
	// unless a tag or a snapshot holds it.
	FSImage string
	// Lifetime is the running time the sandbox may have, counted from
	// CreatedAt with paused time left out; zero means Spec.Timeout. It
	// is set when the lifetime is changed while the sandbox lives
	// (SetRemaining), so the spec keeps what the caller asked at create
	// (and what snapshots and forks copy).
	Lifetime time.Duration
	// RuntimeInfo is what the runtime says about the sandbox's machine
	// (vm: the accelerator, machine type, kernel); nil when nothing.
	RuntimeInfo map[string]string
	// Dir is the per-sandbox host directory the runtime owns.
	Dir string
	// Phases is how long each step of the create took, in order (steps
	// of the runtime's own are named "runtime.<step>" and lie within
	// "runtime"). Kept in memory by the daemon that made the sandbox, not
	// in the records.
	Phases []Phase
}

// How a paused sandbox is paused (Sandbox.PauseKind).
const (
	// PauseMemory: saved whole (memory, processes, connections, files);
	// resuming restores it as it was.
	PauseMemory = "memory"
	// PauseFilesystem: only its root filesystem is kept, as an image;
	// resuming boots it afresh on that image, under the same id, network
	// and ports, with no process of before.
	PauseFilesystem = "filesystem"
)

// Phase is one timed step of a create.
type Phase struct {
	Name     string
	Duration time.Duration
}

// ExpiresAt is when the lifetime timeout fires (while paused: when it
// would fire had the pause ended at once; paused time does not count).
func (s *Sandbox) ExpiresAt() time.Time { return s.CreatedAt.Add(s.lifetime() + s.PausedFor) }

// lifetime is the running time the sandbox may have.
func (s *Sandbox) lifetime() time.Duration {
	if s.Lifetime > 0 {
		return s.Lifetime
	}
	return s.Spec.Timeout
}

// SetRemaining makes the lifetime end d of running time after now (for a
// paused sandbox: d after it resumes), shortening or extending it. With
// extendOnly a lifetime that already ends later is kept. It reports
// whether the lifetime changed.
func (s *Sandbox) SetRemaining(now time.Time, d time.Duration, extendOnly bool) bool {
	if !s.PausedAt.IsZero() {
		now = s.PausedAt // the clock stopped at the pause
	}
	l := max(now.Add(d).Sub(s.CreatedAt)-s.PausedFor, 1) // zero would mean Spec.Timeout
	if l == s.lifetime() || extendOnly && l < s.lifetime() {
		return false
	}
	s.Lifetime = l
	return true
}
