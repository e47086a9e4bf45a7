package audit

import (
	"fmt"
	"strconv"
)

// Problems Verify reports.
const (
	// Edited: the entry's hash is not the hash of its content.
	Edited = "edited"
	// Removed: entries are missing before this one (a gap in seq, or a
	// pruned prefix no checkpoint accounts for).
	Removed = "removed"
	// Reordered: the entry does not follow the one before it (a seq out of
	// order or repeated, or a previous hash that is another entry's).
	Reordered = "reordered"
)

// Break is the first entry at which a trail stops verifying.
type Break struct {
	Seq     int64  `json:"seq"`
	Problem string `json:"problem"`
	Detail  string `json:"detail"`
}

func (b *Break) Error() string {
	return fmt.Sprintf("audit entry %d: %s: %s", b.Seq, b.Problem, b.Detail)
}

// Verifier walks a trail in the order it is stored, one entry at a time
// (Add), and reports the first break (Result). The first entry must be
// seq 1 chained to Genesis, or chain to the hash a later checkpoint entry
// gives for the pruned prefix.
type Verifier struct {
	n       int64
	first   *Entry
	prev    *Entry
	broken  *Break
	anchors map[int64]string // pruned_through -> pruned_hash
}

// Add checks e against the entry before it.
func (v *Verifier) Add(e Entry) {
	v.n++
	if e.Kind == KindCheckpoint {
		if through, err := strconv.ParseInt(e.Fields["pruned_through"], 10, 64); err == nil {
			if v.anchors == nil {
				v.anchors = map[int64]string{}
			}
			v.anchors[through] = e.Fields["pruned_hash"]
		}
	}
	if v.first == nil {
		v.first, v.prev = &e, &e
		if Hash(e.PrevHash, e) != e.Hash {
			v.fail(e.Seq, Edited, "its hash does not match its content")
		}
		return
	}
	p := v.prev
	v.prev = &e
	switch {
	case e.Seq <= p.Seq:
		// An entry of a gap seen earlier turning up late: the gap was a
		// move, not a removal.
		if b := v.broken; b != nil && b.Problem == Removed && e.Seq >= b.Seq {
			b.Problem, b.Detail = Reordered, fmt.Sprintf("entry %d comes after entry %d", e.Seq, p.Seq)
		}
		v.fail(e.Seq, Reordered, fmt.Sprintf("seq %d follows seq %d", e.Seq, p.Seq))
	case e.Seq > p.Seq+1:
		v.fail(p.Seq+1, Removed, fmt.Sprintf("entries %d to %d are missing", p.Seq+1, e.Seq-1))
	case Hash(e.PrevHash, e) != e.Hash:
		v.fail(e.Seq, Edited, "its hash does not match its content")
	case e.PrevHash != p.Hash:
		v.fail(e.Seq, Reordered, fmt.Sprintf("it does not chain to entry %d", p.Seq))
	}
}

func (v *Verifier) fail(seq int64, problem, detail string) {
	if v.broken == nil {
		v.broken = &Break{Seq: seq, Problem: problem, Detail: detail}
	}
}

// Result is the first break (nil: the trail verifies), the number of
// entries walked and the last entry's hash (empty for an empty trail).
func (v *Verifier) Result() (*Break, int64, string) {
	if v.first == nil {
		return nil, 0, ""
	}
	head := v.prev.Hash
	f := v.first
	switch {
	case f.Seq == 1 && f.PrevHash == Genesis:
	case f.Seq == 1:
		return &Break{Seq: 1, Problem: Edited, Detail: "the first entry does not chain to the genesis hash"}, v.n, head
	default:
		want, ok := v.anchors[f.Seq-1]
		if !ok {
			return &Break{Seq: f.Seq - 1, Problem: Removed, Detail: fmt.Sprintf("entries up to %d are gone and no checkpoint accounts for them", f.Seq-1)}, v.n, head
		}
		if want != f.PrevHash {
			return &Break{Seq: f.Seq, Problem: Reordered, Detail: "it does not chain to the hash its checkpoint gives for the pruned entries"}, v.n, head
		}
	}
	return v.broken, v.n, head
}

// Verify walks entries (in stored order) and returns the first break.
func Verify(entries []Entry) (*Break, int64, string) {
	var v Verifier
	for _, e := range entries {
		v.Add(e)
	}
	return v.Result()
}
