package audit

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"corral/internal/records"
	"corral/internal/seal"
)

// openTrail opens a trail on a fresh store and returns the database file,
// which tests edit directly, as an intruder would.
func openTrail(t *testing.T) (*Trail, *records.Store, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	st, err := records.Open(ctx, path, seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tr, err := Open(ctx, Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr, st, path
}

func record(t *testing.T, tr *Trail, n int) {
	t.Helper()
	for i := range n {
		tr.Record("exec", "sb-a", "token:abc", map[string]string{"argv": fmt.Sprintf(`["true","%d"]`, i)})
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func sqlExec(t *testing.T, path, q string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

func verify(t *testing.T, tr *Trail) Report {
	t.Helper()
	r, err := tr.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTrailTampered(t *testing.T) {
	for _, tc := range []struct {
		name, sql string
		seq       int64
		problem   string
	}{
		{"edited", `UPDATE audit SET fields = '{"argv":"[\"curl\",\"evil\"]"}' WHERE seq = 3`, 3, Edited},
		{"time edited", `UPDATE audit SET time = time + 1 WHERE seq = 4`, 4, Edited},
		{"removed", `DELETE FROM audit WHERE seq = 2`, 2, Removed},
		{"reordered", `UPDATE audit SET seq = -seq WHERE seq IN (3, 4); UPDATE audit SET seq = 7 + seq WHERE seq IN (-3, -4)`, 3, Edited},
		{"prefix removed", `DELETE FROM audit WHERE seq <= 2`, 2, Removed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, path := openTrail(t)
			record(t, tr, 5)
			if r := verify(t, tr); r.Broken != nil || r.Entries != 5 {
				t.Fatalf("before the edit: %+v", r)
			}
			sqlExec(t, path, tc.sql)
			r := verify(t, tr)
			if r.Broken == nil || r.Broken.Seq != tc.seq || r.Broken.Problem != tc.problem {
				t.Fatalf("got %+v, want entry %d %s", r.Broken, tc.seq, tc.problem)
			}
		})
	}
}

func TestTrailPrune(t *testing.T) {
	tr, st, path := openTrail(t)
	ctx := context.Background()
	record(t, tr, 3)
	cut := time.Now()
	record(t, tr, 2)
	if err := tr.Prune(ctx, cut); err != nil {
		t.Fatal(err)
	}
	record(t, tr, 1)
	all, err := st.QueryAudit(ctx, Filter{Limit: 100}, false)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, e := range all {
		seqs = append(seqs, e.Seq)
	}
	if fmt.Sprint(seqs) != "[4 5 6 7]" || all[2].Kind != KindCheckpoint || all[2].Fields["pruned_through"] != "3" || all[2].Fields["pruned"] != "3" {
		t.Fatalf("after pruning 3 of 5 and one more: %v %+v", seqs, all[2])
	}
	if r := verify(t, tr); r.Broken != nil || r.Entries != 4 {
		t.Fatalf("pruned trail: %+v", r)
	}
	// Everything pruned: the checkpoint alone still verifies, and so does
	// the trail after it.
	if err := tr.Prune(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	record(t, tr, 1)
	if r := verify(t, tr); r.Broken != nil || r.Entries != 2 {
		t.Fatalf("fully pruned trail: %+v %+v", r, r.Broken)
	}
	sqlExec(t, path, `DELETE FROM audit WHERE kind = 'checkpoint'`)
	if r := verify(t, tr); r.Broken == nil || r.Broken.Problem != Removed || r.Broken.Seq != 8 {
		t.Fatalf("checkpoint removed: %+v", r.Broken)
	}
}

func TestTrailReopen(t *testing.T) {
	tr, st, _ := openTrail(t)
	ctx := context.Background()
	record(t, tr, 2)
	tr.Close()
	tr2, err := Open(ctx, Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	record(t, tr2, 2)
	r := verify(t, tr2)
	if r.Broken != nil || r.Entries != 4 {
		t.Fatalf("a trail continued by a second writer: %+v", r)
	}
	got, err := tr2.Query(ctx, Filter{Kinds: []string{"exec"}, SandboxID: "sb-a", After: 2, Limit: 10})
	if err != nil || len(got) != 2 || got[0].Seq != 3 || got[0].Caller != "token:abc" {
		t.Fatalf("query: %v %+v", err, got)
	}
}

func TestTokenCaller(t *testing.T) {
	c := TokenCaller("s3cret-token")
	if len(c) != len("token:")+12 || c == TokenCaller("other") || c != TokenCaller("s3cret-token") {
		t.Fatalf("TokenCaller: %q", c)
	}
}
