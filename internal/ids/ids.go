// Package ids makes and checks the ids of sandboxes and memory snapshots.
// An id reaches host paths (sandbox directories, network state files,
// image leases), runtime command lines and SQL queries, so every layer that
// takes one checks it here, with the same rule: the exact shape New*
// produces. Hostile or merely odd strings ("..", "a/b", 200 bytes) never
// get past it.
//
// It imports nothing from Corral but errdefs.
package ids

import (
	"crypto/rand"
	"encoding/base32"
	"strings"

	"corral/internal/errdefs"
)

// The prefixes of the two kinds of id.
const (
	SandboxPrefix  = "sb-"
	SnapshotPrefix = "snap-"
	// randLetters is the number of base32 letters after the prefix (80
	// random bits).
	randLetters = 16
)

var encoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewSandbox returns a fresh sandbox id: "sb-" and 16 lowercase base32
// letters.
func NewSandbox() string { return newID(SandboxPrefix) }

// NewSnapshot returns a fresh memory snapshot id: "snap-" and 16 lowercase
// base32 letters.
func NewSnapshot() string { return newID(SnapshotPrefix) }

func newID(prefix string) string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return prefix + strings.ToLower(encoding.EncodeToString(b[:]))
}

// Sandbox reports whether id has the shape NewSandbox produces.
func Sandbox(id string) bool { return valid(id, SandboxPrefix) }

// Snapshot reports whether id has the shape NewSnapshot produces.
func Snapshot(id string) bool { return valid(id, SnapshotPrefix) }

// CheckSandbox is Sandbox as an invalid_argument error naming the field
// "id".
func CheckSandbox(id string) error {
	if !Sandbox(id) {
		return errdefs.Invalid("id", "%q is not a sandbox id (%s and %d letters a-z, 2-7)", truncate(id), SandboxPrefix, randLetters)
	}
	return nil
}

func valid(id, prefix string) bool {
	if len(id) != len(prefix)+randLetters || !strings.HasPrefix(id, prefix) {
		return false
	}
	for _, c := range id[len(prefix):] {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// truncate keeps error messages about hostile ids short.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
