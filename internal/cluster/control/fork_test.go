package control

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/pgtest"
	"corral/internal/cluster/store"
	"corral/pkg/apiv1"
)

// snapNode is a node that takes, sends, keeps and restores memory
// snapshots as far as a control plane can tell; refuse makes its imports
// or its fork copies fail as a node of another runtime version would.
type snapNode struct {
	id, cred      string
	refuseImport  bool
	refuseCopy    bool
	mu            sync.Mutex
	snaps         map[string]bool
	sandboxes     map[string]bool
	n             int
	deletedSnaps  []string
	deletedCopies []string
	// image is the image its snapshots are of ("": none named); an
	// import is refused until the node holds it (hasImage, set by a
	// fetch), as a node lacking a snapshot's image refuses it.
	image    string
	hasImage bool
	// e2bCreates and timeouts are the bodies its E2B face got.
	e2bCreates, timeouts []string
}

func (f *snapNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !nodeauth.Equal(r.Header.Get(nodeauth.Header), f.cred) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := r.URL.Path
	answer := func(status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
	newID := func(prefix string) string { f.n++; return fmt.Sprintf("%s-%s%d", prefix, f.id, f.n) }
	switch {
	case r.Method == "POST" && p == "/v1/sandboxes":
		id := newID("sb")
		f.sandboxes[id] = true
		answer(201, `{"id":"`+id+`","state":"running"}`)
	case r.Method == "GET" && strings.HasPrefix(p, "/v1/sandboxes/") && strings.Count(p, "/") == 3:
		answer(200, `{"id":"`+strings.TrimPrefix(p, "/v1/sandboxes/")+`","state":"running","tags":{"team":"x"}}`)
	case r.Method == "DELETE" && strings.HasPrefix(p, "/v1/sandboxes/"):
		id := strings.TrimPrefix(p, "/v1/sandboxes/")
		delete(f.sandboxes, id)
		f.deletedCopies = append(f.deletedCopies, id)
		answer(202, `{}`)
	case r.Method == "POST" && strings.HasSuffix(p, "/snapshots/memory"):
		id := "snap-aaaaaaaaaaaaaaa" + fmt.Sprint(f.n%10)
		f.n++
		f.snaps[id] = true
		var req apiv1.SnapshotMemoryRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		sandboxID := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/sandboxes/"), "/snapshots/memory")
		answer(201, `{"id":"`+id+`","name":"`+req.Name+`","sandbox_id":"`+sandboxID+`","runtime":"gvisor","runtime_version":"v1","cpu":1,"memory_mb":512,"disk_mb":1024,"image":"`+f.image+`"}`)
	case r.Method == "GET" && strings.HasPrefix(p, apiv1.NodeSnapshotExport):
		_, _ = io.WriteString(w, "a tar stream")
	case r.Method == "POST" && p == apiv1.NodeSnapshotImport:
		_, _ = io.ReadAll(r.Body)
		if f.image != "" && !f.hasImage {
			answer(409, `{"error":{"code":"failed_precondition","message":"the snapshot's image is missing here"}}`)
			return
		}
		if f.refuseImport {
			answer(409, `{"error":{"code":"failed_precondition","message":"snapshot was taken by gvisor \"v1\"; this daemon runs \"v2\", which cannot restore it"}}`)
			return
		}
		f.snaps["imported"] = true
		answer(201, `{}`)
	case r.Method == "POST" && p == apiv1.NodeForkCopy:
		if f.refuseCopy {
			answer(409, `{"error":{"code":"failed_precondition","message":"restore failed"}}`)
			return
		}
		id := newID("copy")
		f.sandboxes[id] = true
		answer(201, `{"id":"`+id+`"}`)
	case r.Method == "POST" && p == "/e2b/v2/sandboxes":
		// Its E2B face: a create (from any template) and, for a fork's
		// copies, a timeout and the details.
		id := newID("sb")
		f.sandboxes[id] = true
		b, _ := io.ReadAll(r.Body)
		f.e2bCreates = append(f.e2bCreates, string(b))
		answer(201, `{"sandboxID":"`+id+`"}`)
	case r.Method == "POST" && strings.HasPrefix(p, "/e2b/sandboxes/") && strings.HasSuffix(p, "/timeout"):
		b, _ := io.ReadAll(r.Body)
		f.timeouts = append(f.timeouts, string(b))
		w.WriteHeader(204)
	case r.Method == "GET" && strings.HasPrefix(p, "/e2b/sandboxes/"):
		id := strings.TrimPrefix(p, "/e2b/sandboxes/")
		answer(200, `{"sandboxID":"`+id+`","templateID":"base","clientID":"corral","envdVersion":"0.6.2","envdAccessToken":"tok-`+id+`","domain":null,"state":"running","metadata":{}}`)
	case r.Method == "POST" && f.image != "" && p == nodeauth.ImagesPath+f.image+"/fetch":
		f.hasImage = true
		answer(200, `{}`)
	case r.Method == "DELETE" && strings.HasPrefix(p, "/v1/snapshots/"):
		f.deletedSnaps = append(f.deletedSnaps, strings.TrimPrefix(p, "/v1/snapshots/"))
		answer(200, `{}`)
	default:
		answer(404, `{"error":{"code":"not_found","message":"no route"}}`)
	}
}

// twoSnapNodes registers two snapNodes of room for 4 sandboxes of 512 MiB.
func twoSnapNodes(t *testing.T) (*store.Store, *snapNode, *snapNode) {
	t.Helper()
	st, err := store.Open(context.Background(), pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	var out []*snapNode
	for _, id := range []string{"a", "b"} {
		nonce := nodeauth.NewNonce()
		f := &snapNode{id: id, cred: nodeauth.Credential(testJoin, id, nonce), snaps: map[string]bool{}, sandboxes: map[string]bool{}}
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		if err := st.Register(context.Background(), store.Node{ID: id, Address: srv.URL, CPUMilli: 64000, MemoryMB: 2048, DiskMB: 1 << 20,
			MaxSandboxes: 4, Runtimes: []string{"gvisor"}, RuntimeVersions: map[string]string{"gvisor": "v1"}, CredentialNonce: nonce, CredentialHash: nodeauth.Hash(f.cred)}); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return st, out[0], out[1]
}

// placeOn creates a sandbox through srv with only node on (the other
// drained meanwhile).
func placeOn(t *testing.T, srv *httptest.Server, node, other string) string {
	t.Helper()
	call(t, srv, "POST", "/v1/cluster/nodes/"+other+"/drain", testToken, "")
	defer call(t, srv, "POST", "/v1/cluster/nodes/"+other+"/undrain", testToken, "")
	status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{"memory_mb": 512}`)
	if status != 201 {
		t.Fatalf("create on %s: %d %s", node, status, body)
	}
	var sb apiv1.Sandbox
	_ = json.Unmarshal([]byte(body), &sb)
	return sb.ID
}

// A fork is all or nothing: when one copy fails, the copies made are
// removed, every reservation is released and the fork's snapshot is
// removed from every node that got it.
func TestForkAllOrNothing(t *testing.T) {
	st, a, b := twoSnapNodes(t)
	srv := controlFor(t, st, testJoin)
	parent := placeOn(t, srv, "a", "b")
	b.refuseCopy = true
	// 4 copies of 512 MiB: a has room for 3 beside the parent, so b gets
	// at least one, and fails it.
	status, body := call(t, srv, "POST", "/v1/sandboxes/"+parent+"/fork", testToken, `{"count": 4}`)
	if status < 400 || !strings.Contains(body, "restore failed") {
		t.Fatalf("a fork whose copy fails: %d %s", status, body)
	}
	uses, _ := st.Uses(context.Background())
	if uses["a"].Sandboxes != 1 || uses["b"].Sandboxes != 0 {
		t.Fatalf("after the failed fork: %+v; want the parent alone on a", uses)
	}
	for _, f := range []*snapNode{a, b} {
		for id := range f.sandboxes {
			if id != parent {
				t.Errorf("node %s keeps %s after the failed fork", f.id, id)
			}
		}
	}
	if len(a.deletedSnaps) != 1 || len(b.deletedSnaps) != 1 {
		t.Errorf("the fork's snapshot removed on a %v and b %v; want once on each", a.deletedSnaps, b.deletedSnaps)
	}
	if all, err := st.Snapshots(context.Background()); err != nil || len(all) != 0 {
		t.Errorf("the cluster still knows %+v, %v", all, err)
	}

	// Once b restores, 4 copies land on both nodes and are placed.
	b.refuseCopy = false
	status, body = call(t, srv, "POST", "/v1/sandboxes/"+parent+"/fork", testToken, `{"count": 4}`)
	var res apiv1.ForkResult
	if err := json.Unmarshal([]byte(body), &res); status != 201 || err != nil || len(res.Sandboxes) != 4 {
		t.Fatalf("a fork: %d %s", status, body)
	}
	uses, _ = st.Uses(context.Background())
	if uses["a"].Sandboxes+uses["b"].Sandboxes != 5 || uses["b"].Sandboxes == 0 {
		t.Fatalf("after the fork: %+v; want 5 placed, some on b", uses)
	}
	// Too many copies for the room left: refused, nothing kept.
	if status, body := call(t, srv, "POST", "/v1/sandboxes/"+parent+"/fork", testToken, `{"count": 4}`); status != 429 {
		t.Fatalf("a fork beyond the room left: %d %s", status, body)
	}
	if uses, _ := st.Uses(context.Background()); uses["a"].Sandboxes+uses["b"].Sandboxes != 5 {
		t.Fatalf("a refused fork kept room: %+v", uses)
	}
}

// A create from a snapshot goes to no node that registered another
// version of its runtime; one that refuses it all the same (its runtime
// changed since it registered) answers 409 with the node's reason and
// keeps no room.
func TestFromSnapshotRefusedByVersion(t *testing.T) {
	st, _, b := twoSnapNodes(t)
	srv := controlFor(t, st, testJoin)
	parent := placeOn(t, srv, "a", "b")
	status, body := call(t, srv, "POST", "/v1/sandboxes/"+parent+"/snapshots/memory", testToken, "")
	var sn apiv1.Snapshot
	if err := json.Unmarshal([]byte(body), &sn); status != 201 || err != nil {
		t.Fatalf("snapshot: %d %s", status, body)
	}
	call(t, srv, "POST", "/v1/cluster/nodes/a/drain", testToken, "")
	nb, err := st.Node(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	nb.RuntimeVersions = map[string]string{"gvisor": "v2"}
	if err := st.Register(context.Background(), nb); err != nil {
		t.Fatal(err)
	}
	status, body = call(t, srv, "POST", "/v1/sandboxes", testToken, `{"from_snapshot": "`+sn.ID+`"}`)
	if status != 429 || !strings.Contains(body, `version \"v1\"`) {
		t.Fatalf("a create from a snapshot with no node of its version: %d %s", status, body)
	}
	nb.RuntimeVersions = map[string]string{"gvisor": "v1"}
	if err := st.Register(context.Background(), nb); err != nil {
		t.Fatal(err)
	}
	b.refuseImport = true
	status, body = call(t, srv, "POST", "/v1/sandboxes", testToken, `{"from_snapshot": "`+sn.ID+`"}`)
	if status != 409 || !strings.Contains(body, `this daemon runs \"v2\"`) {
		t.Fatalf("a create from a snapshot only another version could restore: %d %s", status, body)
	}
	if uses, _ := st.Uses(context.Background()); uses["b"].Sandboxes != 0 {
		t.Fatalf("a refused restore kept room on b: %+v", uses["b"])
	}
	if ls, err := st.SnapshotLocations(context.Background(), sn.ID); err != nil || len(ls) != 1 {
		t.Fatalf("the refused node was recorded as holding the snapshot: %+v, %v", ls, err)
	}
}
