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

const (
	testJoin  = "join-token-0123456789abcdef"
	testToken = "user-token-0123456789abcdef"
)

// fakeNode is a node's API as a control plane sees it: it insists on its
// credential and never sees the user token.
type fakeNode struct {
	t      *testing.T
	cred   string
	mu     sync.Mutex
	bodies []map[string]any
	n      int
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" || !nodeauth.Equal(r.Header.Get(nodeauth.Header), f.cred) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes":
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.n++
		id := "sb-fake" + string(rune('a'+f.n))
		f.mu.Unlock()
		name, _ := body["name"].(string)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "name": name, "state": "running", "created_at": time.Now(), "tags": body["tags"], "port_token": "pt-secret"})
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pause"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/sandboxes/"), "/pause")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "state": "paused", "created_at": time.Now(), "tags": map[string]string{"paused-by": "control"}})
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events"):
		// A stream: each line must reach the caller as it is written.
		for i := range 3 {
			_, _ = io.WriteString(w, `{"n":`+string(rune('0'+i))+"}\n")
			w.(http.Flusher).Flush()
		}
	case r.Method == http.MethodGet && r.URL.Path == "/v1/sandboxes":
		_, _ = io.WriteString(w, `{"sandboxes":[{"id":"sb-listed","state":"running"}]}`)
	default:
		_, _ = io.WriteString(w, `{"path":"`+r.URL.Path+`"}`)
	}
}

func setup(t *testing.T) (*store.Store, *fakeNode, string) {
	t.Helper()
	url := pgtest.Start(t)
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	nonce := nodeauth.NewNonce()
	f := &fakeNode{t: t, cred: nodeauth.Credential(testJoin, "n1", nonce)}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	if err := st.Register(context.Background(), store.Node{ID: "n1", Address: srv.URL, CPUMilli: 4000, MemoryMB: 4096, DiskMB: 1 << 20,
		MaxSandboxes: 10, Runtimes: []string{"gvisor"}, Labels: map[string]string{"zone": "a"}, CredentialNonce: nonce,
		CredentialHash: nodeauth.Hash(f.cred)}); err != nil {
		t.Fatal(err)
	}
	pin(t, st, "n1", nodeauth.Hash(f.cred), srv)
	return st, f, url
}

func controlFor(t *testing.T, st *store.Store, join string) *httptest.Server {
	t.Helper()
	s := newServer(st, testToken, join, Config{LostAfter: time.Minute, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestControlPlaneAPI(t *testing.T) {
	st, f, _ := setup(t)
	srv := controlFor(t, st, testJoin)
	for _, c := range []struct {
		name, method, path, token, body string
		status                          int
		want                            string
	}{
		{"no token", "GET", "/v1/sandboxes", "", "", 401, "missing bearer token"},
		{"wrong token", "GET", "/v1/sandboxes", "nope", "", 401, "wrong token"},
		{"health is public", "GET", "/v1/health", "", "", 200, "ok"},
		{"not a JSON object", "POST", "/v1/sandboxes", testToken, "[1]", 400, "want a JSON object"},
		{"bad selector", "POST", "/v1/sandboxes", testToken, `{"node_selector": {"zone": 1}}`, 400, "node_selector"},
		{"bad runtime", "POST", "/v1/sandboxes", testToken, `{"runtime": "docker"}`, 400, "runtime"},
		{"no node with the labels", "POST", "/v1/sandboxes", testToken, `{"node_selector": {"zone": "b"}}`, 429, "labels"},
		{"too big for any node", "POST", "/v1/sandboxes", testToken, `{"memory_mb": 8192}`, 429, "no ready node has room"},
		{"unknown sandbox", "GET", "/v1/sandboxes/sb-nothere", testToken, "", 404, "not found"},
		{"no volumes yet", "GET", "/v1/volumes", testToken, "", 200, `"volumes":[]`},
		{"a bad volume name", "POST", "/v1/volumes", testToken, `{"name": "../x"}`, 400, "name"},
		{"a volume too big", "POST", "/v1/volumes", testToken, `{"name": "v", "size_gib": 5000}`, 400, "size_gib"},
		{"a volume, unknown field", "POST", "/v1/volumes", testToken, `{"name": "v", "size": 1}`, 400, "body"},
		{"an unknown volume", "GET", "/v1/volumes/nothere", testToken, "", 404, "knows no such volume"},
		{"a create with an unknown volume", "POST", "/v1/sandboxes", testToken, `{"volumes": [{"name": "nothere", "path": "/v"}]}`, 404, "nothere"},
		{"a bad secret name", "POST", "/v1/secrets", testToken, `{"name": "a/b", "values": {"K": "v"}}`, 400, "not a secret name"},
		{"a secret of no keys", "POST", "/v1/secrets", testToken, `{"name": "s", "values": {}}`, 400, "at least one key"},
		{"a secret's bad body", "POST", "/v1/secrets", testToken, `{"name": "s", "values": {"K": 1}}`, 400, "body"},
		{"an unknown secret", "GET", "/v1/secrets/nothere", testToken, "", 404, "not found"},
		{"rotate an unknown secret", "PUT", "/v1/secrets/nothere", testToken, `{"values": {"K": "v"}}`, 404, "not found"},
		{"no secrets yet", "GET", "/v1/secrets", testToken, "", 200, `"secrets":[]`},
		{"a layer upload goes to a node", "POST", "/v1/images/layers", testToken, "", 200, `"path":"/v1/images/layers"`},
		{"image list", "GET", "/v1/images", testToken, "", 200, `"images":[]`},
		{"unknown image", "GET", "/v1/images/app:1", testToken, "", 404, "on no ready node"},
		{"build on an unknown node", "POST", "/v1/images/build?node=nx", testToken, "{}", 404, "node nx"},
		{"fork of no copies", "POST", "/v1/sandboxes/sb-x/fork", testToken, `{"count": 0}`, 400, "count"},
		{"fork of too many", "POST", "/v1/sandboxes/sb-x/fork", testToken, `{"count": 101}`, 400, "want 1 to 100"},
		{"fork, unknown field", "POST", "/v1/sandboxes/sb-x/fork", testToken, `{"count": 1, "n": 2}`, 400, "body"},
		{"fork of an unknown sandbox", "POST", "/v1/sandboxes/sb-x/fork", testToken, `{"count": 1}`, 404, "not found"},
		{"from an unknown snapshot", "POST", "/v1/sandboxes", testToken, `{"from_snapshot": "nothere"}`, 404, "knows no snapshot"},
		{"from a bad snapshot ref", "POST", "/v1/sandboxes", testToken, `{"from_snapshot": "../x"}`, 400, "from_snapshot"},
		{"no snapshots yet", "GET", "/v1/snapshots", testToken, "", 200, `"snapshots":[]`},
		{"unknown snapshot", "GET", "/v1/snapshots/snap-aaaaaaaaaaaaaaaa", testToken, "", 404, "not found"},
		{"delete an unknown snapshot", "DELETE", "/v1/snapshots/base", testToken, "", 404, "not found"},
		// The list is the database's: the node's own list is not asked.
		{"empty list", "GET", "/v1/sandboxes", testToken, "", 200, `"sandboxes":[]`},
		{"list with a bad state", "GET", "/v1/sandboxes?state=gone", testToken, "", 400, "state"},
	} {
		status, body := call(t, srv, c.method, c.path, c.token, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want %d with %q", c.name, status, body, c.status, c.want)
		}
	}

	// A create reaches the node without the selector or the user token,
	// and the sandbox's calls then go to that node, streams as written.
	status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{"node_selector": {"zone": "a"}, "memory_mb": 1024}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	var sb struct{ ID string }
	_ = json.Unmarshal([]byte(body), &sb)
	if _, ok := f.bodies[len(f.bodies)-1]["node_selector"]; ok {
		t.Error("the node got the control plane's node_selector")
	}
	if status, body := call(t, srv, "GET", "/v1/sandboxes/"+sb.ID+"/fs/stat?path=/tmp", testToken, ""); status != 200 || !strings.Contains(body, "/v1/sandboxes/"+sb.ID+"/fs/stat") {
		t.Errorf("proxied call: %d %s", status, body)
	}
	if status, body := call(t, srv, "GET", "/v1/sandboxes/"+sb.ID+"/events", testToken, ""); status != 200 || strings.Count(body, "\n") != 3 {
		t.Errorf("proxied stream: %d %q", status, body)
	}
	uses, _ := st.Uses(context.Background())
	if u := uses["n1"]; u.MemoryMB != 1024 || u.Sandboxes != 1 {
		t.Errorf("placed on n1: %+v, want 1024 MiB in 1 sandbox", u)
	}
	if status, _ := call(t, srv, "DELETE", "/v1/sandboxes/"+sb.ID, testToken, ""); status != 200 {
		t.Errorf("delete: %d", status)
	}
	if uses, _ := st.Uses(context.Background()); uses["n1"].Sandboxes != 0 {
		t.Errorf("a deleted sandbox still holds room: %+v", uses["n1"])
	}

	// A name finds its sandbox's node, and is the cluster's alone.
	if status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{"name": "web"}`); status != 201 {
		t.Fatalf("create named web: %d %s", status, body)
	}
	if status, body := call(t, srv, "GET", "/v1/sandboxes/web", testToken, ""); status != 200 || !strings.Contains(body, "/v1/sandboxes/web") {
		t.Errorf("by name: %d %s", status, body)
	}
	if status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{"name": "web"}`); status != 409 || !strings.Contains(body, "web") {
		t.Errorf("a second sandbox named web: %d %s", status, body)
	}

	checkListRecords(t, srv)

	// A drained node takes no creates; undrained, it does again.
	if status, body := call(t, srv, "POST", "/v1/cluster/nodes/n1/drain", testToken, ""); status != 200 || !strings.Contains(body, `"draining":true`) {
		t.Fatalf("drain: %d %s", status, body)
	}
	if status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{}`); status != 429 {
		t.Errorf("a create with the only node drained: %d %s", status, body)
	}
	if status, body := call(t, srv, "POST", "/v1/cluster/nodes/n1/undrain", testToken, ""); status != 200 || strings.Contains(body, "draining") {
		t.Fatalf("undrain: %d %s", status, body)
	}
	if status, body := call(t, srv, "POST", "/v1/cluster/nodes/n9/drain", testToken, ""); status != 404 {
		t.Errorf("drain an unknown node: %d %s", status, body)
	}

	// A control plane with another join token cannot reach the node.
	other := controlFor(t, st, "another-join-token-0123456789")
	if status, body := call(t, other, "POST", "/v1/sandboxes", testToken, `{}`); status != 503 || !strings.Contains(body, "join token") {
		t.Errorf("with another join token: %d %s", status, body)
	}
}

// A sandbox whose node was lost answers that it is lost.
func TestLostSandboxAnswers(t *testing.T) {
	st, _, url := setup(t)
	srv := controlFor(t, st, testJoin)
	status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	var sb struct{ ID string }
	_ = json.Unmarshal([]byte(body), &sb)
	// The node has been silent for an hour, seen from another pool.
	if err := silence(url, "n1"); err != nil {
		t.Fatal(err)
	}
	if lost, err := st.MarkLost(context.Background(), time.Minute); err != nil || len(lost) != 1 {
		t.Fatalf("lost %v, %v", lost, err)
	}
	status, body = call(t, srv, "GET", "/v1/sandboxes/"+sb.ID, testToken, "")
	if status != 409 || !strings.Contains(body, "is lost") || !strings.Contains(body, "n1") {
		t.Errorf("a lost sandbox: %d %s", status, body)
	}
	if status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{}`); status != 429 {
		t.Errorf("a create with the only node lost: %d %s", status, body)
	}
}

// checkListRecords: the list through a control plane shows the sandboxes
// placed through it, with the records their node answered, a pause's
// answer replacing the record (state and tags), and never the node's own
// list (the fake node lists sb-listed).
func checkListRecords(t *testing.T, srv *httptest.Server) {
	t.Helper()
	status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{"tags": {"team": "a"}}`)
	var sb struct{ ID string }
	if status != 201 || json.Unmarshal([]byte(body), &sb) != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	list := func(query string) apiv1.SandboxList {
		t.Helper()
		status, body := call(t, srv, "GET", "/v1/sandboxes"+query, testToken, "")
		var l apiv1.SandboxList
		if status != 200 || json.Unmarshal([]byte(body), &l) != nil || strings.Contains(body, "sb-listed") {
			t.Fatalf("list %s: %d %s", query, status, body)
		}
		return l
	}
	if l := list("?tag=team=a"); len(l.Sandboxes) != 1 || l.Sandboxes[0].ID != sb.ID || l.Sandboxes[0].State != "running" {
		t.Fatalf("list by tag: %+v, want %s running", l, sb.ID)
	}
	if l := list(""); l.Sandboxes[len(l.Sandboxes)-1].PortToken != "" {
		t.Fatalf("a port token kept in the database: %+v", l.Sandboxes)
	}
	if l := list("?state=running&limit=1"); len(l.Sandboxes) != 1 || l.Next == "" {
		t.Fatalf("a page of 1 of 2 running: %+v, want one and a next token", l)
	}
	if status, body := call(t, srv, "POST", "/v1/sandboxes/"+sb.ID+"/pause", testToken, ""); status != 200 {
		t.Fatalf("pause: %d %s", status, body)
	}
	if l := list("?state=paused&tag=paused-by"); len(l.Sandboxes) != 1 || l.Sandboxes[0].ID != sb.ID {
		t.Fatalf("after a pause through the control plane: %+v, want %s paused with its new tags", l, sb.ID)
	}
	if l := list("?tag=team"); len(l.Sandboxes) != 0 {
		t.Fatalf("the pause's record did not replace the tags: %+v", l)
	}
}
