package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/internal/cluster/pgtest"
	"corral/internal/errdefs"
)

func open(t testing.TB, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Several instances starting at once all migrate, and the schema ends at
// the newest version, each migration applied once.
func TestMigrateConcurrently(t *testing.T) {
	url := pgtest.Start(t)
	const n = 8
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), url)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, url)
	v, err := s.SchemaVersion(context.Background())
	if err != nil || v != len(migrations) {
		t.Fatalf("schema version %d, %v; want %d", v, err, len(migrations))
	}
	var rows int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&rows); err != nil || rows != len(migrations) {
		t.Fatalf("%d migration rows, %v; want %d", rows, err, len(migrations))
	}
}

func testNode(id string, mem int64) Node {
	return Node{ID: id, Address: "http://127.0.0.1:1", CPUMilli: 64000, MemoryMB: mem, DiskMB: 1 << 20, MaxSandboxes: 1000,
		Runtimes: []string{"gvisor"}, Labels: map[string]string{"zone": "a"}, CredentialNonce: "n", CredentialHash: "h-" + id}
}

// Two control instances (two stores, two pools) reserving at once never
// give a node more than it has: every node ends at or under its memory,
// and every admitted reservation is counted.
func TestConcurrentAdmissionNeverOvercommits(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	a, b := open(t, url), open(t, url)
	// Each node holds exactly 10 sandboxes of 512 MiB.
	for i := range 3 {
		if err := a.Register(ctx, testNode(fmt.Sprintf("n%d", i), 5120)); err != nil {
			t.Fatal(err)
		}
	}
	req := Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 512, DiskMB: 100, FreshWithin: time.Minute}
	var mu sync.Mutex
	admitted, refused := 0, 0
	var placed []string
	var wg sync.WaitGroup
	for i := range 40 { // 40 asks for 30 places
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.Reserve(ctx, req)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted++
				placed = append(placed, p.ID)
			case errors.Is(err, errdefs.ErrResourceExhausted):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if admitted != 30 || refused != 10 {
		t.Fatalf("admitted %d, refused %d; want 30 and 10", admitted, refused)
	}
	uses, err := a.Uses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, u := range uses {
		if u.MemoryMB > 5120 || u.Sandboxes > 10 {
			t.Errorf("node %s overcommitted: %+v", id, u)
		}
	}
	checkCounters(t, a)

	// Half bound then ended, half released, from both stores at once:
	// every node's counters come back to zero.
	for i, rsv := range placed {
		s := []*Store{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if i%4 < 2 {
				id := fmt.Sprintf("sb-c%d", i)
				if err = s.Bind(ctx, rsv, id, ""); err == nil {
					err = s.End(ctx, id)
				}
			} else {
				err = s.Release(ctx, rsv)
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	checkCounters(t, a)
	uses, _ = a.Uses(ctx)
	for id, u := range uses {
		if u != (Use{Node: id}) {
			t.Errorf("node %s after every sandbox ended: %+v", id, u)
		}
	}
}

// checkCounters fails t where a node's counters differ from the sums of
// its live placements.
func checkCounters(t *testing.T, s *Store) {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT n.id FROM nodes n
		LEFT JOIN (SELECT node_id, sum(cpu_milli) c, sum(memory_mb) m, sum(disk_mb) d, count(*) k
			FROM placements WHERE state IN ('reserved', 'placed', 'ending') GROUP BY node_id) p ON p.node_id = n.id
		WHERE (n.used_cpu_milli, n.used_memory_mb, n.used_disk_mb, n.used_sandboxes) <>
			(coalesce(p.c, 0), coalesce(p.m, 0), coalesce(p.d, 0), coalesce(p.k, 0))`)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(bad) > 0 {
		t.Fatalf("nodes whose counters drifted from their placements: %v, %v", bad, err)
	}
}

// Placement honours runtimes and labels, a bound sandbox is found by its
// id, and a silent node is marked lost with its sandboxes, which a
// returning node is then told to reap.
func TestPlacementLabelsAndLoss(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	s := open(t, url)
	a, b := testNode("a", 4096), testNode("b", 4096)
	b.Labels = map[string]string{"zone": "b", "gpu": "yes"}
	b.Runtimes = []string{"gvisor", "vm"}
	for _, n := range []Node{a, b} {
		if err := s.Register(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	dup := testNode("a", 1)
	dup.CredentialHash = "another"
	if err := s.Register(ctx, dup); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("a second node under a's name: %v, want already exists", err)
	}
	base := Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 256, DiskMB: 10, FreshWithin: time.Minute}
	for _, c := range []struct {
		name string
		req  func(Request) Request
		want string
	}{
		{"label", func(r Request) Request { r.Labels = map[string]string{"gpu": "yes"}; return r }, "b"},
		{"runtime", func(r Request) Request { r.Runtime = "vm"; return r }, "b"},
		{"exclude", func(r Request) Request { r.Exclude = []string{"b"}; return r }, "a"},
	} {
		p, err := s.Reserve(ctx, c.req(base))
		if err != nil || p.Node.ID != c.want {
			t.Fatalf("%s: placed on %q, %v; want %s", c.name, p.Node.ID, err, c.want)
		}
	}
	if _, err := s.Reserve(ctx, func() Request { r := base; r.Labels = map[string]string{"zone": "c"}; return r }()); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("no node with zone=c: %v", err)
	}
	// A drained node takes nothing new until undrained.
	if n, err := s.Drain(ctx, "b", true); err != nil || !n.Draining {
		t.Fatalf("drain b: %+v, %v", n, err)
	}
	if p, err := s.Reserve(ctx, func() Request { r := base; r.Runtime = "vm"; return r }()); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("placed on the drained node: %+v, %v", p, err)
	}
	if _, err := s.Drain(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Drain(ctx, "nothere", true); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("drain an unknown node: %v", err)
	}
	p, err := s.Reserve(ctx, func() Request { r := base; r.Exclude = []string{"b"}; return r }())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(ctx, p.ID, "sb-one", ""); err != nil {
		t.Fatal(err)
	}
	// A name is the cluster's: a second placed sandbox cannot bind it.
	for i, id := range []string{"sb-named1", "sb-named2"} {
		p, err := s.Reserve(ctx, func() Request { r := base; r.Exclude = []string{"a"}; return r }())
		if err != nil {
			t.Fatal(err)
		}
		err = s.Bind(ctx, p.ID, id, "web")
		if i == 1 && !errors.Is(err, errdefs.ErrAlreadyExists) || i == 0 && err != nil {
			t.Fatalf("binding %s named web: %v", id, err)
		}
	}
	if got, err := s.Lookup(ctx, "web"); err != nil || got.ID != "sb-named1" {
		t.Fatalf("lookup by name: %+v, %v", got, err)
	}
	got, err := s.Lookup(ctx, "sb-one")
	if err != nil || got.Node.ID != "a" || got.State != Placed {
		t.Fatalf("lookup: %+v, %v", got, err)
	}
	// a has been silent for an hour; b beats.
	if _, err := s.pool.Exec(ctx, `UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'a'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Heartbeat(ctx, b, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	lost, err := s.MarkLost(ctx, time.Minute)
	if err != nil || len(lost) != 1 || lost[0] != "a" {
		t.Fatalf("lost %v, %v; want [a]", lost, err)
	}
	if got, _ := s.Lookup(ctx, "sb-one"); got.State != Lost {
		t.Fatalf("sb-one is %s after its node was lost", got.State)
	}
	if p, err := s.Reserve(ctx, func() Request { r := base; r.Exclude = []string{"b"}; return r }()); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("placed on the lost node: %+v, %v", p, err)
	}
	// a returns: it is told to reap sb-one, and once it has, is not again.
	reap, err := s.Heartbeat(ctx, a, []string{"sb-one"}, time.Hour)
	if err != nil || len(reap) != 1 || reap[0] != "sb-one" {
		t.Fatalf("reap %v, %v; want [sb-one]", reap, err)
	}
	if err := s.Reaped(ctx, "a", reap); err != nil {
		t.Fatal(err)
	}
	if reap, err := s.Heartbeat(ctx, a, nil, time.Hour); err != nil || len(reap) != 0 {
		t.Fatalf("reap again %v, %v", reap, err)
	}
	if _, err := s.Heartbeat(ctx, func() Node { w := a; w.CredentialHash = "wrong"; return w }(), nil, time.Hour); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("heartbeat with a wrong credential: %v", err)
	}
	checkCounters(t, s)
	// b no longer runs what was placed on it (grace 0): the heartbeat
	// ends those placements and frees the room.
	if _, err := s.Heartbeat(ctx, b, nil, 0); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s)
	if uses, _ := s.Uses(ctx); uses["b"].Sandboxes != 3 {
		t.Fatalf("b after a heartbeat listing nothing: %+v; want its 3 unbound reservations only (label, runtime, the second web)", uses["b"])
	}
}

// Only one instance leads at a time, and the lock passes on when the
// leader resigns.
func TestLeaderIsOne(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	a, b := open(t, url), open(t, url)
	la, err := a.Lead(ctx)
	if err != nil || la == nil {
		t.Fatalf("first leader: %v, %v", la, err)
	}
	if lb, err := b.Lead(ctx); err != nil || lb != nil {
		t.Fatalf("second instance also leads: %v, %v", lb, err)
	}
	la.Resign(ctx)
	lb, err := b.Lead(ctx)
	if err != nil || lb == nil {
		t.Fatalf("no leader after the first resigned: %v", err)
	}
	lb.Resign(ctx)
}

// A sandbox being removed keeps its room until its node's heartbeat no
// longer lists it, at once (no grace: it was bound long before).
func TestEndingHoldsRoomUntilGone(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	s := open(t, url)
	n := testNode("a", 4096)
	if err := s.Register(ctx, n); err != nil {
		t.Fatal(err)
	}
	p, err := s.Reserve(ctx, Request{Runtime: "gvisor", CPUMilli: 100, MemoryMB: 256, FreshWithin: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(ctx, p.ID, "sb-e", "named"); err != nil {
		t.Fatal(err)
	}
	if err := s.Ending(ctx, "sb-e"); err != nil {
		t.Fatal(err)
	}
	if taken, err := s.NameTaken(ctx, "named"); err != nil || !taken {
		t.Fatalf("the name of a sandbox being removed: taken %v, %v", taken, err)
	}
	for _, c := range []struct {
		live []string
		want int
	}{{[]string{"sb-e"}, 1}, {nil, 0}} {
		if _, err := s.Heartbeat(ctx, n, c.live, time.Hour); err != nil {
			t.Fatal(err)
		}
		if uses, _ := s.Uses(ctx); uses["a"].Sandboxes != c.want {
			t.Fatalf("node listing %v: %d sandboxes held, want %d", c.live, uses["a"].Sandboxes, c.want)
		}
		checkCounters(t, s)
	}
	if got, err := s.Lookup(ctx, "sb-e"); err != nil || got.State != Ended {
		t.Fatalf("after its node no longer lists it: %+v, %v", got, err)
	}
}
