package node

import (
	"testing"
	"time"

	"corral/internal/usage"
)

// TestLiveDue: every live sandbox's figures go every liveEvery, and in
// between only those of sandboxes not shipped yet.
func TestLiveDue(t *testing.T) {
	sh := &shipper{}
	rec := func(ids ...string) []usage.Record {
		var rs []usage.Record
		for _, id := range ids {
			rs = append(rs, usage.Record{SandboxID: id})
		}
		return rs
	}
	ids := func(rs []usage.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.SandboxID)
		}
		return out
	}
	t0 := time.Now()
	ship := func(now time.Time, live ...string) ([]string, bool) {
		due, all := sh.liveDue(rec(live...), now)
		for _, r := range due {
			sh.liveShipped[r.SandboxID] = true
		}
		if all {
			sh.liveAt = now
		}
		return ids(due), all
	}
	check := func(got []string, all bool, want []string, wantAll bool) {
		t.Helper()
		if all != wantAll || len(got) != len(want) {
			t.Fatalf("shipped %v (all: %v); want %v (all: %v)", got, all, want, wantAll)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("shipped %v; want %v", got, want)
			}
		}
	}
	got, all := ship(t0, "a", "b")
	check(got, all, []string{"a", "b"}, true)
	got, all = ship(t0.Add(time.Second), "a", "b")
	check(got, all, nil, false)
	got, all = ship(t0.Add(2*time.Second), "a", "b", "c")
	check(got, all, []string{"c"}, false)
	got, all = ship(t0.Add(liveEvery-time.Millisecond), "b", "c", "d")
	check(got, all, []string{"d"}, false)
	got, all = ship(t0.Add(liveEvery), "b", "c", "d")
	check(got, all, []string{"b", "c", "d"}, true)
	got, all = ship(t0.Add(liveEvery+time.Second), "b", "c", "d")
	check(got, all, nil, false)
}
