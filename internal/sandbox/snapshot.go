package sandbox

import (
	"time"

	"corral/internal/ids"
)

// Snapshot is the durable record of a memory snapshot: a sandbox's whole
// state (memory, processes, writable layer) saved by its runtime, from
// which new sandboxes start as copies.
type Snapshot struct {
	ID   string // "snap-" and 16 base32 letters
	Name string // optional, unique among snapshots
	// SandboxID is the sandbox it was taken from.
	SandboxID string
	// Spec is that sandbox's spec: a copy gets its image, runtime and
	// resources.
	Spec Spec
	// Runtime and RuntimeVersion name what saved it; only the same
	// runtime at the same version can restore it.
	Runtime        string
	RuntimeVersion string
	// AgentProtocol and AgentVersion describe the agent frozen inside.
	AgentProtocol int
	AgentVersion  string
	SizeBytes     int64
	CreatedAt     time.Time
	// Dir holds the runtime's files.
	Dir string
}

// ValidSnapshotName reports whether n can name a snapshot (as a sandbox
// name: letters, digits, '_', '.', '-').
func ValidSnapshotName(n string) bool { return nameRE.MatchString(n) }

// ValidSnapshotRef reports whether ref is a snapshot id or a valid name.
func ValidSnapshotRef(ref string) bool { return ids.Snapshot(ref) || ValidSnapshotName(ref) }
