package control

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/pgtest"
	"corral/internal/cluster/store"
	"corral/pkg/apiv1"
)

// moveNode is a node that pauses, resumes, snapshots and takes moved
// sandboxes as far as a control plane can tell; refuseMoveIn makes its
// restores fail.
type moveNode struct {
	id, cred     string
	refuseMoveIn bool
	mu           sync.Mutex
	states       map[string]string // sandbox id → state
	ops          []string
	snaps        map[string]bool
	n            int
}

func (f *moveNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !nodeauth.Equal(r.Header.Get(nodeauth.Header), f.cred) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := r.URL.Path
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	record := func(id string) apiv1.Sandbox {
		return apiv1.Sandbox{ID: id, State: f.states[id], Runtime: "gvisor", CPU: 1, MemoryMB: 512, DiskMB: 1024}
	}
	rest, _ := strings.CutPrefix(p, "/v1/sandboxes/")
	id, op, _ := strings.Cut(rest, "/")
	switch {
	case r.Method == "GET" && p == "/v1/sandboxes":
		l := apiv1.SandboxList{Sandboxes: []apiv1.Sandbox{}}
		for id := range f.states {
			l.Sandboxes = append(l.Sandboxes, record(id))
		}
		answer(200, l)
	case strings.HasPrefix(p, "/v1/sandboxes/") && f.states[id] == "":
		answer(404, map[string]any{"error": map[string]string{"code": "not_found", "message": "sandbox " + id}})
	case r.Method == "GET" && op == "":
		answer(200, record(id))
	case r.Method == "POST" && (op == "pause" || op == "resume"):
		f.ops = append(f.ops, op+" "+id)
		f.states[id] = map[string]string{"pause": "paused", "resume": "running"}[op]
		answer(200, record(id))
	case r.Method == "POST" && op == "snapshots/memory":
		f.ops = append(f.ops, "snapshot "+id)
		f.n++
		sn := "snap-aaaaaaaaaaaaaaaaaa" + string(rune('a'+f.n))
		f.snaps[sn] = true
		answer(201, apiv1.Snapshot{ID: sn, Runtime: "gvisor", RuntimeVersion: "v1", CPU: 1, MemoryMB: 512, DiskMB: 1024})
	case r.Method == "GET" && strings.HasPrefix(p, apiv1.NodeSnapshotExport):
		_, _ = io.WriteString(w, "a tar stream")
	case r.Method == "POST" && p == apiv1.NodeSnapshotImport:
		_, _ = io.ReadAll(r.Body)
		f.snaps["imported"] = true
		answer(201, apiv1.Snapshot{})
	case r.Method == "DELETE" && strings.HasPrefix(p, "/v1/snapshots/"):
		delete(f.snaps, strings.TrimPrefix(p, "/v1/snapshots/"))
		delete(f.snaps, "imported")
		answer(200, apiv1.Snapshot{})
	case r.Method == "POST" && p == apiv1.NodeMoveIn:
		var req apiv1.MoveInRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.ops = append(f.ops, "move-in "+req.ID)
		if f.refuseMoveIn {
			answer(409, map[string]any{"error": map[string]string{"code": "failed_precondition", "message": "restore failed"}})
			return
		}
		f.states[req.ID] = "paused"
		answer(201, apiv1.MovedIn{ID: req.ID, State: "paused"})
	case r.Method == "POST" && strings.HasPrefix(p, apiv1.NodeMoveRemove):
		id := strings.TrimPrefix(p, apiv1.NodeMoveRemove)
		f.ops = append(f.ops, "remove "+id)
		delete(f.states, id)
		w.WriteHeader(http.StatusNoContent)
	default:
		answer(404, map[string]any{"error": map[string]string{"code": "not_found", "message": "no route " + r.Method + " " + p}})
	}
}

func (f *moveNode) state(id string) (string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.states[id], append([]string(nil), f.ops...)
}

// drainSetup registers two moveNodes, a holding sb-paused (paused) and
// sb-running (running), both placed there, and a control plane.
func drainSetup(t *testing.T) (*store.Store, *Server, *httptest.Server, *moveNode, *moveNode) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	nodes := map[string]*moveNode{}
	for _, id := range []string{"a", "b"} {
		nonce := nodeauth.NewNonce()
		f := &moveNode{id: id, cred: nodeauth.Credential(testJoin, id, nonce), states: map[string]string{}, snaps: map[string]bool{}}
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		if err := st.Register(ctx, store.Node{ID: id, Address: srv.URL, CPUMilli: 64000, MemoryMB: 2048, DiskMB: 1 << 20,
			MaxSandboxes: 4, Runtimes: []string{"gvisor"}, RuntimeVersions: map[string]string{"gvisor": "v1"}, CredentialNonce: nonce, CredentialHash: nodeauth.Hash(f.cred)}); err != nil {
			t.Fatal(err)
		}
		nodes[id] = f
	}
	a, b := nodes["a"], nodes["b"]
	for id, state := range map[string]string{"sb-paused": "paused", "sb-running": "running"} {
		rsv, err := st.Reserve(ctx, store.Request{Runtime: "gvisor", CPUMilli: 1000, MemoryMB: 512, DiskMB: 1024, Exclude: []string{"b"}, FreshWithin: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Bind(ctx, rsv.ID, id, ""); err != nil {
			t.Fatal(err)
		}
		a.states[id] = state
	}
	s := newServer(st, testToken, testJoin, Config{LostAfter: time.Minute, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return st, s, srv, a, b
}

// A drain's move is all or nothing: when the target's restore fails the
// sandbox stays on its node, paused, its placement and the room as they
// were, the snapshot gone, the reason reported; a running sandbox stays
// with why. Drained again with the target fixed, it moves under its id:
// placed on the target, paused there, gone from its old node.
func TestDrainMoveRollsBack(t *testing.T) {
	ctx := context.Background()
	st, s, srv, a, b := drainSetup(t)
	drain := func() apiv1.DrainProgress {
		t.Helper()
		if status, body := call(t, srv, "POST", "/v1/cluster/nodes/a/drain", testToken, ""); status != 200 {
			t.Fatalf("drain: %d %s", status, body)
		}
		s.drainTick(ctx)
		s.drains.running.Wait()
		s.drainTick(ctx) // a rescan after the moves
		s.drains.running.Wait()
		_, body := call(t, srv, "GET", "/v1/cluster/nodes", testToken, "")
		var ns apiv1.ClusterNodes
		_ = json.Unmarshal([]byte(body), &ns)
		for _, n := range ns.Nodes {
			if n.ID == "a" && n.Drain != nil {
				return *n.Drain
			}
		}
		t.Fatalf("no drain progress for a in %s", body)
		return apiv1.DrainProgress{}
	}

	b.refuseMoveIn = true
	d := drain()
	reasons := map[string]string{}
	for _, sb := range d.NotMoved {
		reasons[sb.ID] = sb.Reason
	}
	if !d.Done || d.ToMove != 0 || len(d.Moved) != 0 || !strings.Contains(reasons["sb-paused"], "restore failed") ||
		!strings.HasPrefix(reasons["sb-running"], "running") {
		t.Fatalf("a drain whose restore fails: %+v", d)
	}
	state, ops := a.state("sb-paused")
	if state != "paused" || strings.Join(ops, ",") != "resume sb-paused,snapshot sb-paused,pause sb-paused" {
		t.Fatalf("the source after a failed move: %s, ops %v; want paused, snapshotted once, not removed", state, ops)
	}
	if p, err := st.Lookup(ctx, "sb-paused"); err != nil || p.Node.ID != "a" {
		t.Fatalf("the placement after a failed move: %+v, %v", p, err)
	}
	if uses, _ := st.Uses(ctx); uses["a"].Sandboxes != 2 || uses["b"].Sandboxes != 0 {
		t.Fatalf("the room after a failed move: %+v", uses)
	}
	if state, _ := b.state("sb-paused"); state != "" {
		t.Fatalf("the target keeps the sandbox: %s", state)
	}
	if sn, _ := st.Snapshots(ctx); len(sn) != 0 || len(a.snaps) != 0 || len(b.snaps) != 0 {
		t.Fatalf("the move's snapshot is left: %+v, a %v, b %v", sn, a.snaps, b.snaps)
	}

	b.refuseMoveIn = false
	d = drain()
	if !d.Done || len(d.Moved) != 1 || d.Moved[0] != (apiv1.DrainSandbox{ID: "sb-paused", Node: "b"}) || len(d.NotMoved) != 1 {
		t.Fatalf("a drain that moves: %+v", d)
	}
	if p, err := st.Lookup(ctx, "sb-paused"); err != nil || p.Node.ID != "b" || p.State != store.Placed {
		t.Fatalf("the placement after the move: %+v, %v", p, err)
	}
	if state, _ := a.state("sb-paused"); state != "" {
		t.Fatalf("the old node keeps the moved sandbox: %s", state)
	}
	if state, _ := b.state("sb-paused"); state != "paused" {
		t.Fatalf("the moved sandbox on its new node: %q; want paused", state)
	}
	if uses, _ := st.Uses(ctx); uses["a"].Sandboxes != 1 || uses["b"].Sandboxes != 1 {
		t.Fatalf("the room after the move: %+v", uses)
	}
	if sn, _ := st.Snapshots(ctx); len(sn) != 0 {
		t.Fatalf("the move's snapshot is left: %+v", sn)
	}

	// A copy the move left on a (its removal failed) goes at the next
	// pass; a sandbox placed on b that this drain did not move (a move
	// into a in flight) stays.
	rsv, err := st.Reserve(ctx, store.Request{Runtime: "gvisor", CPUMilli: 1000, MemoryMB: 512, DiskMB: 1024, Exclude: []string{"a"}, FreshWithin: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Bind(ctx, rsv.ID, "sb-incoming", ""); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.states["sb-paused"], a.states["sb-incoming"] = "paused", "paused"
	a.mu.Unlock()
	s.drainTick(ctx)
	s.drains.running.Wait()
	if left, _ := a.state("sb-paused"); left != "" {
		t.Errorf("the copy a move left behind is still there: %q", left)
	}
	if in, _ := a.state("sb-incoming"); in != "paused" {
		t.Errorf("a sandbox moving in was removed: %q", in)
	}
}

// A move whose control plane died midway is taken over from what it
// recorded: with the placement not yet turned, what the target got is
// removed, the source (left running by the snapshot's resume) paused
// again, the old snapshot dropped, and the move made anew; with the
// placement turned, only the source's copy is removed.
func TestDrainMoveRecovers(t *testing.T) {
	ctx := context.Background()
	st, s, _, a, b := drainSetup(t)
	na, err := st.Node(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	claim := func(target, snapshot string) store.DrainMove {
		t.Helper()
		if err := st.StartDrain(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if err := st.ScanDrain(ctx, "a", []store.Found{{Sandbox: "sb-paused"}}); err != nil {
			t.Fatal(err)
		}
		ms, err := st.ClaimMoves(ctx, "a", 1, time.Minute)
		if err != nil || len(ms) != 1 {
			t.Fatalf("claim: %+v, %v", ms, err)
		}
		ms[0].Target, ms[0].Snapshot = target, snapshot
		if err := st.MoveProgress(ctx, ms[0]); err != nil {
			t.Fatal(err)
		}
		return ms[0]
	}
	// Died after the restore, before the placement turned.
	a.states["sb-paused"] = "running"
	b.states["sb-paused"] = "paused"
	a.snaps["snap-old"] = true
	if err := st.AddSnapshot(ctx, store.SnapshotLocation{ID: "snap-old", Node: "a", Runtime: "gvisor", RuntimeVersion: "v1"}); err != nil {
		t.Fatal(err)
	}
	s.runMove(ctx, na, claim("b", "snap-old"))
	_, opsA := a.state("sb-paused")
	_, opsB := b.state("sb-paused")
	if strings.Join(opsA, ",") != "pause sb-paused,resume sb-paused,snapshot sb-paused,pause sb-paused,remove sb-paused" ||
		strings.Join(opsB, ",") != "remove sb-paused,move-in sb-paused" {
		t.Fatalf("an interrupted move taken over: a %v, b %v", opsA, opsB)
	}
	if p, err := st.Lookup(ctx, "sb-paused"); err != nil || p.Node.ID != "b" {
		t.Fatalf("the placement after the move taken over: %+v, %v", p, err)
	}
	if sn, _ := st.Snapshots(ctx); len(sn) != 0 || a.snaps["snap-old"] {
		t.Fatalf("the interrupted move's snapshot is left: %+v %v", sn, a.snaps)
	}
	checkDrain(t, st, "sb-paused", store.MoveMoved, "b")

	// Died after the placement turned: the copy left on a goes.
	a.states["sb-paused"] = "paused"
	a.ops = nil
	s.runMove(ctx, na, claim("b", ""))
	if state, ops := a.state("sb-paused"); state != "" || strings.Join(ops, ",") != "remove sb-paused" {
		t.Fatalf("a finished move taken over: a holds %q after %v", state, ops)
	}
	if state, _ := b.state("sb-paused"); state != "paused" {
		t.Fatalf("the moved sandbox on b: %q", state)
	}
	checkDrain(t, st, "sb-paused", store.MoveMoved, "b")
	if uses, _ := st.Uses(ctx); uses["a"].Sandboxes != 1 || uses["b"].Sandboxes != 1 {
		t.Fatalf("the room after the moves taken over: %+v", uses)
	}
}

func checkDrain(t *testing.T, st *store.Store, id, state, target string) {
	t.Helper()
	ds, err := st.Drains(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ds["a"].Moves {
		if m.Sandbox == id {
			if m.State != state || m.Target != target {
				t.Fatalf("move of %s: %+v; want %s to %q", id, m, state, target)
			}
			return
		}
	}
	t.Fatalf("no move of %s in %+v", id, ds["a"])
}
