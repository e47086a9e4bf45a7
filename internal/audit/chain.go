// Package audit keeps Corral's audit trail: an append-only record of who
// did what to which sandbox (API calls that change something, execs,
// files written or removed, lifecycle moves, network decisions), each
// entry chained to the one before by a SHA-256 hash, so that an entry
// edited, removed or moved in the store is found by Verify.
//
// The entries live in the records store (table audit, ordered by seq); a
// single writer goroutine (Trail) gives them their seq and hash, so that
// recording costs a caller a channel send, never a disk write. The package
// imports records and nothing else from the daemon; the manager, the API
// and the E2B face call it.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"corral/internal/records"
)

// Entry is one entry of the trail.
type Entry = records.AuditEntry

// Genesis is the previous hash of the trail's first entry.
var Genesis = strings.Repeat("0", 64)

// KindCheckpoint marks a prune: its fields name the last pruned entry's
// seq (pruned_through) and hash (pruned_hash), which the first entry left
// chains to.
const KindCheckpoint = "checkpoint"

// canonical is what an entry's hash covers: every field but the hashes,
// in a fixed order (encoding/json sorts map keys), the time in Unix
// nanoseconds.
func canonical(e Entry) []byte {
	b, _ := json.Marshal(struct {
		Seq       int64             `json:"seq"`
		Time      int64             `json:"time"`
		Kind      string            `json:"kind"`
		SandboxID string            `json:"sandbox_id"`
		Caller    string            `json:"caller"`
		Fields    map[string]string `json:"fields"`
	}{e.Seq, e.Time.UnixNano(), e.Kind, e.SandboxID, e.Caller, e.Fields})
	return b
}

// Hash is the hash of e chained to prev: hex(sha256(prev "\n" canonical(e))).
func Hash(prev string, e Entry) string {
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write([]byte{'\n'})
	h.Write(canonical(e))
	return hex.EncodeToString(h.Sum(nil))
}

// link fills in e's seq, previous hash and hash as the entry after head
// (nil: e is the first).
func link(head *Entry, e *Entry) {
	e.Seq, e.PrevHash = 1, Genesis
	if head != nil {
		e.Seq, e.PrevHash = head.Seq+1, head.Hash
	}
	e.Hash = Hash(e.PrevHash, *e)
}

// checkpoint is the entry recording that the trail up to and including
// last was pruned (n entries).
func checkpoint(last Entry, n int64) Entry {
	return Entry{Kind: KindCheckpoint, Fields: map[string]string{
		"pruned_through": strconv.FormatInt(last.Seq, 10),
		"pruned_hash":    last.Hash,
		"pruned":         strconv.FormatInt(n, 10),
	}}
}

// Kinds are the kinds of entry the trail holds.
var Kinds = []string{
	"api", "create", "terminate", "failed", "pause", "resume", "snapshot", "fork", "update", "network_policy",
	"egress_allowed", "egress_denied", "limit_reached", "port_connection", "timeout", "idle_timeout", "oom", "crashed",
	"exec", "file_write", "file_remove", "file_rename", KindCheckpoint, "lost",
}
