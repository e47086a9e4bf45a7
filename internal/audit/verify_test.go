package audit

import (
	"fmt"
	"testing"
	"time"
)

// chain returns n linked entries.
func chain(n int) []Entry {
	var out []Entry
	var head *Entry
	t0 := time.Unix(1700000000, 0).UTC()
	for i := range n {
		e := Entry{Time: t0.Add(time.Duration(i) * time.Second), Kind: "exec", SandboxID: "sb-x",
			Fields: map[string]string{"argv": fmt.Sprintf(`["echo","%d"]`, i)}}
		link(head, &e)
		out = append(out, e)
		head = &out[len(out)-1]
	}
	return out
}

func TestVerify(t *testing.T) {
	edit := func(es []Entry) []Entry { es[2].Fields = map[string]string{"argv": `["rm","-rf","/"]`}; return es }
	editCaller := func(es []Entry) []Entry { es[4].Caller = "token:someoneelse"; return es }
	rehash := func(es []Entry) []Entry {
		// An edit whose own hash is recomputed still breaks the next link.
		es[2].Kind = "file_write"
		es[2].Hash = Hash(es[2].PrevHash, es[2])
		return es
	}
	remove := func(es []Entry) []Entry { return append(es[:2:2], es[3:]...) }
	removeRenumber := func(es []Entry) []Entry {
		out := append(es[:2:2], es[3:]...)
		for i := 2; i < len(out); i++ {
			out[i].Seq--
		}
		return out
	}
	swap := func(es []Entry) []Entry { es[2], es[3] = es[3], es[2]; return es }
	removeFirst := func(es []Entry) []Entry { return es[1:] }
	for _, tc := range []struct {
		name    string
		mangle  func([]Entry) []Entry
		seq     int64
		problem string
	}{
		{"intact", func(es []Entry) []Entry { return es }, 0, ""},
		{"edited", edit, 3, Edited},
		{"edited caller", editCaller, 5, Edited},
		{"edited and rehashed", rehash, 4, Reordered},
		{"removed", remove, 3, Removed},
		{"removed and renumbered", removeRenumber, 3, Edited},
		{"reordered", swap, 3, Reordered},
		{"first removed", removeFirst, 1, Removed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _, _ := Verify(tc.mangle(chain(6)))
			if tc.problem == "" {
				if b != nil {
					t.Fatalf("intact chain reported broken: %v", b)
				}
				return
			}
			if b == nil || b.Seq != tc.seq || b.Problem != tc.problem {
				t.Fatalf("got %+v, want seq %d %s", b, tc.seq, tc.problem)
			}
		})
	}
}

func TestVerifyCheckpoint(t *testing.T) {
	es := chain(5)
	cp := checkpoint(es[2], 3)
	cp.Time = es[4].Time
	link(&es[4], &cp)
	kept := append([]Entry{}, es[3:]...)
	kept = append(kept, cp)
	if b, n, head := Verify(kept); b != nil || n != 3 || head != cp.Hash {
		t.Fatalf("pruned trail with its checkpoint: %v, %d entries, head %s", b, n, head)
	}
	// A prefix cut deeper than the checkpoint says.
	if b, _, _ := Verify(kept[1:]); b == nil || b.Seq != 4 || b.Problem != Removed {
		t.Fatalf("a removal past the checkpoint: got %+v", b)
	}
	// The checkpoint itself removed.
	if b, _, _ := Verify(kept[:2]); b == nil || b.Seq != 3 || b.Problem != Removed {
		t.Fatalf("a removed checkpoint: got %+v", b)
	}
	// The checkpoint edited to fit another prefix.
	forged := append([]Entry{}, kept...)
	forged[2].Fields = map[string]string{"pruned_through": "3", "pruned_hash": es[3].PrevHash}
	if b, _, _ := Verify(forged); b == nil || b.Seq != 6 || b.Problem != Edited {
		t.Fatalf("an edited checkpoint: got %+v", b)
	}
}
