package sandbox

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
	"time"
)

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
	// RuntimeInfo is what the runtime says about the sandbox's machine
	// (vm: the accelerator, machine type, kernel); nil when nothing.
	RuntimeInfo map[string]string
	// Dir is the per-sandbox host directory the runtime owns.
	Dir string
	// PortToken grants access to the sandbox's non-public exposed ports.
	PortToken string
}

// ExpiresAt is when the lifetime timeout fires.
func (s *Sandbox) ExpiresAt() time.Time { return s.CreatedAt.Add(s.Spec.Timeout + s.PausedFor) }

// NewID returns a fresh sandbox id: "sb-" and 16 lowercase base32 letters
// (80 random bits).
func NewID() string { return newID("sb-") }

func newID(prefix string) string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// ValidID reports whether id has the shape NewID produces, so hostile ids
// never reach a path or a runtime command line.
func ValidID(id string) bool { return validID(id, "sb-") }

func validID(id, prefix string) bool {
	if len(id) != len(prefix)+16 || !strings.HasPrefix(id, prefix) {
		return false
	}
	for _, c := range id[len(prefix):] {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
