package control

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/pkg/apiv1"
)

// fakeE2BNode is a node's /e2b and envd face as a control plane sees
// them: /e2b insists on the node's credential and never sees the
// caller's key; envd sees the caller's headers as they came. It runs the
// sandboxes it is given, oldest first, and pages its list as a node does.
type fakeE2BNode struct {
	id   string
	cred string
	mu   sync.Mutex
	sbs  []string
	seen []string // "METHOD path" of each /e2b call
	envd []http.Header
}

func (f *fakeE2BNode) api(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-KEY") != "" || r.Header.Get("Authorization") != "" || !nodeauth.Equal(r.Header.Get(nodeauth.Header), f.cred) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, r.Method+" "+r.URL.Path)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/e2b/v2/sandboxes":
		id := fmt.Sprintf("sb-%s%d", f.id, len(f.sbs))
		f.sbs = append(f.sbs, id)
		writeJSON(w, http.StatusCreated, map[string]string{"sandboxID": id, "envdAccessToken": "tok-" + id})
	case r.Method == http.MethodGet && r.URL.Path == "/e2b/sandboxes":
		out := []map[string]string{}
		for _, id := range f.sbs {
			out = append(out, map[string]string{"sandboxID": id})
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == http.MethodGet && r.URL.Path == "/e2b/v2/sandboxes":
		if r.URL.Query().Get("state") == "bogus" {
			writeJSON(w, http.StatusBadRequest, e2bErrorBody{Code: 400, Message: "state: must be running or paused"})
			return
		}
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		start, _ := strconv.Atoi(r.URL.Query().Get("nextToken"))
		end := min(start+limit, len(f.sbs))
		out := []map[string]string{}
		for _, id := range f.sbs[start:end] {
			out = append(out, map[string]string{"sandboxID": id})
		}
		if end < len(f.sbs) {
			w.Header().Set("X-Next-Token", strconv.Itoa(end))
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/e2b/sandboxes/"):
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && r.URL.Path == "/e2b/sandboxes/metrics":
		// The latest sample of each asked for that it runs.
		f.seen[len(f.seen)-1] += "?" + r.URL.RawQuery
		out := map[string]map[string]int{}
		for id := range strings.SplitSeq(r.URL.Query().Get("sandbox_ids"), ",") {
			if slices.Contains(f.sbs, id) {
				out[id] = map[string]int{"cpuCount": 1}
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
	case r.Method == http.MethodPost && r.URL.Path == apiv1.NodeSignedFiles:
		// A sandbox "signs" with v1_ and its id.
		var req apiv1.SignedFilesRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		q, _ := url.ParseQuery(req.Query)
		if id, ok := strings.CutPrefix(q.Get("signature"), "v1_"); ok && slices.Contains(f.sbs, id) {
			writeJSON(w, http.StatusOK, apiv1.SignedFilesMatch{SandboxID: id})
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"code": "not_found", "message": "no sandbox signed it"}})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"path": r.URL.Path})
	}
}

func (f *fakeE2BNode) envdFace(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.envd = append(f.envd, r.Header.Clone())
	f.mu.Unlock()
	if r.URL.Path == "/duplex" {
		// Answers before it reads the request's body, as a stream
		// may; then reads the body to its end.
		_ = http.NewResponseController(w).EnableFullDuplex()
		_, _ = io.WriteString(w, "ready\n")
		w.(http.Flusher).Flush()
		b, err := io.ReadAll(r.Body)
		_, _ = fmt.Fprintf(w, "got %q %v\n", b, err)
		return
	}
	// A server stream: each line must reach the caller as it is written.
	for i := range 3 {
		_, _ = fmt.Fprintf(w, "%s %s %d\n", f.id, r.URL.Path, i)
		w.(http.Flusher).Flush()
	}
}

// e2bCluster registers nodes a and b (fakes) beside setup's n1.
func e2bCluster(t *testing.T) (*store.Store, map[string]*fakeE2BNode) {
	t.Helper()
	st, _, _ := setup(t)
	// n1 (setup's) takes nothing: it is drained.
	if _, err := st.Drain(context.Background(), "n1", true); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*fakeE2BNode{}
	for _, id := range []string{"a", "b"} {
		nonce := nodeauth.NewNonce()
		f := &fakeE2BNode{id: id, cred: nodeauth.Credential(testJoin, id, nonce)}
		api, envd := httptest.NewTLSServer(http.HandlerFunc(f.api)), httptest.NewTLSServer(http.HandlerFunc(f.envdFace))
		t.Cleanup(api.Close)
		t.Cleanup(envd.Close)
		if err := st.Register(context.Background(), store.Node{ID: id, Address: api.URL, EnvdAddress: envd.URL, CPUMilli: 64000,
			MemoryMB: 1 << 20, DiskMB: 1 << 20, MaxSandboxes: 100, Runtimes: []string{"gvisor"}, CredentialNonce: nonce,
			CredentialHash: nodeauth.Hash(f.cred)}); err != nil {
			t.Fatal(err)
		}
		pin(t, st, id, nodeauth.Hash(f.cred), api)
		nodes[id] = f
	}
	return st, nodes
}

func e2bCall(t *testing.T, srv *httptest.Server, method, path, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestE2BFace: the E2B face of a control plane places creates on the
// nodes, passes calls by id to the owning node with its credential,
// pages a list across nodes without repeating or skipping a sandbox, and
// answers errors in E2B's shape.
func TestE2BFace(t *testing.T) {
	st, nodes := e2bCluster(t)
	srv := controlFor(t, st, testJoin)
	key := e2bKeyPrefix + testToken

	for _, k := range []string{"", "e2b_wrong", testToken} {
		resp, body := e2bCall(t, srv, "GET", "/e2b/v2/sandboxes", k, "")
		var e e2bErrorBody
		if resp.StatusCode != 401 || json.Unmarshal([]byte(body), &e) != nil || e.Code != 401 || e.Message == "" {
			t.Errorf("key %q: %d %s, want 401 in E2B's shape", k, resp.StatusCode, body)
		}
	}
	if resp, body := e2bCall(t, srv, "POST", "/e2b/v2/sandboxes", key, `[1]`); resp.StatusCode != 400 || !strings.Contains(body, `"code":400`) {
		t.Errorf("a create of no object: %d %s", resp.StatusCode, body)
	}
	var ids []string
	for range 7 {
		resp, body := e2bCall(t, srv, "POST", "/e2b/v2/sandboxes", key, `{"templateID":"base"}`)
		var sb struct{ SandboxID string }
		if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &sb) != nil || sb.SandboxID == "" {
			t.Fatalf("create: %d %s", resp.StatusCode, body)
		}
		ids = append(ids, sb.SandboxID)
	}
	if len(nodes["a"].sbs) == 0 || len(nodes["b"].sbs) == 0 {
		t.Fatalf("creates all on one node: a %v, b %v", nodes["a"].sbs, nodes["b"].sbs)
	}

	// Pages of 3 over 7 sandboxes on two nodes: each once, then no token.
	var got []string
	tok, pages := "", 0
	for {
		path := "/e2b/v2/sandboxes?limit=3&metadata=suite%3Dx"
		if tok != "" {
			path += "&nextToken=" + tok
		}
		resp, body := e2bCall(t, srv, "GET", path, key, "")
		var page []struct{ SandboxID string }
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &page) != nil || len(page) > 3 {
			t.Fatalf("list page %d: %d %s", pages, resp.StatusCode, body)
		}
		for _, sb := range page {
			got = append(got, sb.SandboxID)
		}
		pages++
		if tok = resp.Header.Get("X-Next-Token"); tok == "" || pages > 10 {
			break
		}
	}
	want := append(append([]string(nil), nodes["a"].sbs...), nodes["b"].sbs...)
	if full := (len(want) + 2) / 3; pages != full {
		t.Errorf("%d pages of 3 for %d sandboxes, want %d: no empty last page", pages, len(want), full)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged list %v, want %v (node a's, then b's)", got, want)
	}
	for _, bad := range []string{"limit=0", "limit=1001", "nextToken=%21%21", "nextToken=e30"} {
		if resp, body := e2bCall(t, srv, "GET", "/e2b/v2/sandboxes?"+bad, key, ""); resp.StatusCode != 400 || !strings.Contains(body, `"code":400`) {
			t.Errorf("list ?%s: %d %s, want 400", bad, resp.StatusCode, body)
		}
	}
	// A node's refusal of a filter is relayed as it is.
	if resp, body := e2bCall(t, srv, "GET", "/e2b/v2/sandboxes?state=bogus", key, ""); resp.StatusCode != 400 || !strings.Contains(body, "state") {
		t.Errorf("a filter the node refuses: %d %s", resp.StatusCode, body)
	}
	if resp, body := e2bCall(t, srv, "GET", "/e2b/sandboxes", key, ""); resp.StatusCode != 200 || strings.Count(body, "sandboxID") != 7 {
		t.Errorf("v1 list: %d %s", resp.StatusCode, body)
	}

	// By id: to the owning node, the key replaced by its credential.
	on := func(id string) *fakeE2BNode {
		for _, f := range nodes {
			for _, s := range f.sbs {
				if s == id {
					return f
				}
			}
		}
		t.Fatalf("%s on no node", id)
		return nil
	}
	for _, id := range ids[:2] {
		if resp, body := e2bCall(t, srv, "POST", "/e2b/sandboxes/"+id+"/timeout", key, `{"timeout":5}`); resp.StatusCode != 200 || !strings.Contains(body, "/e2b/sandboxes/"+id+"/timeout") {
			t.Errorf("timeout of %s: %d %s", id, resp.StatusCode, body)
		}
		if f := on(id); f.seen[len(f.seen)-1] != "POST /e2b/sandboxes/"+id+"/timeout" {
			t.Errorf("node %s saw %v", f.id, f.seen)
		}
	}
	if resp, body := e2bCall(t, srv, "DELETE", "/e2b/sandboxes/"+ids[0], key, ""); resp.StatusCode != 204 {
		t.Errorf("kill: %d %s", resp.StatusCode, body)
	}
	if p, err := st.Lookup(context.Background(), ids[0]); err != nil || p.State != store.Ended {
		t.Errorf("after a kill the placement is %+v %v, want ended", p, err)
	}
	resp, body := e2bCall(t, srv, "GET", "/e2b/sandboxes/sb-nosuch", key, "")
	if resp.StatusCode != 404 || !strings.Contains(body, `"code":404`) || !strings.Contains(body, "sb-nosuch") {
		t.Errorf("an unknown sandbox: %d %s", resp.StatusCode, body)
	}
	// Several sandboxes' metrics: each node asked once for its own; an
	// unknown or ended sandbox left out.
	q := "sandbox_ids=" + strings.Join(ids, ",") + ",sb-nosuch&sandbox_ids=" + ids[1]
	resp, body = e2bCall(t, srv, "GET", "/e2b/sandboxes/metrics?"+q, key, "")
	var met struct{ Sandboxes map[string]json.RawMessage }
	if err := json.Unmarshal([]byte(body), &met); resp.StatusCode != 200 || err != nil || len(met.Sandboxes) != len(ids)-1 || met.Sandboxes[ids[0]] != nil {
		t.Errorf("metrics of %d: %d %s, want all but the killed %s", len(ids)+1, resp.StatusCode, body, ids[0])
	}
	for _, f := range nodes {
		asked := 0
		for _, c := range f.seen {
			if strings.HasPrefix(c, "GET /e2b/sandboxes/metrics?") {
				asked++
				for id := range strings.SplitSeq(strings.TrimPrefix(c, "GET /e2b/sandboxes/metrics?sandbox_ids="), "%2C") {
					if !slices.Contains(f.sbs, id) {
						t.Errorf("node %s was asked for %s, which it does not run (%s)", f.id, id, c)
					}
				}
			}
		}
		if asked != 1 {
			t.Errorf("node %s was asked for metrics %d times, want once: %v", f.id, asked, f.seen)
		}
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprint("sb-", i)
	}
	for _, bad := range []string{"", "sandbox_ids=", "sandbox_ids=" + strings.Join(many, ",")} {
		if resp, body := e2bCall(t, srv, "GET", "/e2b/sandboxes/metrics?"+bad, key, ""); resp.StatusCode != 400 || !strings.Contains(body, "sandbox_ids") {
			t.Errorf("metrics ?%s: %d %s, want 400 naming sandbox_ids", bad, resp.StatusCode, body)
		}
	}
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/e2b/sandboxes/" + ids[1] + "/fork", `{"count":0}`, "count"},
		{"POST", "/e2b/sandboxes/" + ids[1] + "/fork", `{"timeout":-1}`, "timeout"},
		{"POST", "/e2b/sandboxes/" + ids[1] + "/fork", `{"copies":2}`, "copies"},
		{"POST", "/e2b/sandboxes/" + ids[1] + "/snapshots", `{"name":"corral.x"}`, "name"},
		{"GET", "/e2b/snapshots?limit=0", "", "limit"},
		{"GET", "/e2b/snapshots?sandbox=x", "", "sandbox"},
	} {
		if resp, body := e2bCall(t, srv, c.method, c.path, key, c.body); resp.StatusCode != 400 || !strings.Contains(body, c.field) {
			t.Errorf("%s %s %s: %d %s, want 400 naming %s", c.method, c.path, c.body, resp.StatusCode, body, c.field)
		}
	}
	if resp, body := e2bCall(t, srv, "DELETE", "/e2b/templates/no-such-snap", key, ""); resp.StatusCode != 404 || !strings.Contains(body, "no-such-snap") {
		t.Errorf("deleting an unknown snapshot: %d %s, want 404 naming it", resp.StatusCode, body)
	}
	if resp, body := e2bCall(t, srv, "GET", "/e2b/templates", key, ""); resp.StatusCode != 400 || !strings.Contains(body, "not served") {
		t.Errorf("an unserved path: %d %s, want 400 naming it not served", resp.StatusCode, body)
	}

	// A template that names an image only node a holds: a create placed
	// on b has b fetch it first; a never does.
	const digest = "sha256:" + "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"
	if err := st.RecordImage(context.Background(), store.NodeImage{Node: "a", Digest: digest, Tags: []string{"tools:latest"}}); err != nil {
		t.Fatal(err)
	}
	fetch := "POST /v1/cluster/node/images/" + digest + "/fetch"
	for i := 0; i < 8 && !slices.Contains(nodes["b"].seen, fetch); i++ {
		if resp, body := e2bCall(t, srv, "POST", "/e2b/v2/sandboxes", key, `{"templateID":"tools"}`); resp.StatusCode != 201 {
			t.Fatalf("a create from an image template: %d %s", resp.StatusCode, body)
		}
	}
	if !slices.Contains(nodes["b"].seen, fetch) || slices.Contains(nodes["a"].seen, fetch) {
		t.Errorf("an image template only a holds: b saw %v, a saw %v; want b (only) to fetch it", nodes["b"].seen, nodes["a"].seen)
	}
}

// TestEnvdRouting: the envd face passes a request to the envd face of
// the sandbox's node, named by header or by Host, with the caller's
// access token unchanged and no node credential; a stream arrives line
// by line; a sandbox no node runs is a 502 in envd's shape.
func TestEnvdRouting(t *testing.T) {
	st, nodes := e2bCluster(t)
	s := newServer(st, testToken, testJoin, Config{LostAfter: time.Minute, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	envd := httptest.NewServer(s.EnvdHandler())
	t.Cleanup(envd.Close)
	key := e2bKeyPrefix + testToken
	owner := map[string]string{}
	for range 4 {
		_, body := e2bCall(t, srv, "POST", "/e2b/v2/sandboxes", key, `{"templateID":"base"}`)
		var sb struct{ SandboxID string }
		_ = json.Unmarshal([]byte(body), &sb)
		owner[sb.SandboxID] = ""
	}
	for id := range owner {
		for _, f := range nodes {
			for _, s := range f.sbs {
				if s == id {
					owner[id] = f.id
				}
			}
		}
	}
	for id, node := range owner {
		for _, byHost := range []bool{false, true} {
			req, _ := http.NewRequest("POST", envd.URL+"/process.Process/Start", nil)
			req.Header.Set("X-Access-Token", "tok-"+id)
			req.Header.Set(nodeauth.Header, "forged")
			if byHost {
				req.Host = "49983-" + id + ".corral.test"
			} else {
				req.Header.Set(envdSandboxHeader, id)
				req.Header.Set(envdPortHeader, "49983")
			}
			resp, err := envd.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := fmt.Sprintf("%s /process.Process/Start 0\n%[1]s /process.Process/Start 1\n%[1]s /process.Process/Start 2\n", node)
			if resp.StatusCode != 200 || string(b) != want {
				t.Fatalf("%s (by host %v): %d %q, want %q", id, byHost, resp.StatusCode, b, want)
			}
			f := nodes[node]
			f.mu.Lock()
			h := f.envd[len(f.envd)-1]
			f.mu.Unlock()
			if h.Get("X-Access-Token") != "tok-"+id || h.Get(envdSandboxHeader) != id || h.Get(envdPortHeader) != "49983" || h.Get(nodeauth.Header) != "" {
				t.Errorf("%s (by host %v): the node's envd face saw %v", id, byHost, h)
			}
		}
	}
	// A signed URL names no sandbox: it goes to the node whose sandbox
	// signed it, the sandbox named in the headers, the signature as it
	// came.
	for id, node := range owner {
		resp, err := envd.Client().Get(envd.URL + "/files?path=/x&signature_expiration=1900000000&signature=v1_" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		f := nodes[node]
		f.mu.Lock()
		h := f.envd[len(f.envd)-1]
		f.mu.Unlock()
		if resp.StatusCode != 200 || h.Get(envdSandboxHeader) != id {
			t.Errorf("a URL signed by %s: %d, its node %s saw %v", id, resp.StatusCode, node, h)
		}
	}
	for _, c := range []struct {
		name, host, id, port string
		status               int
	}{
		{"unknown sandbox", "", "sb-nosuch", "", 502},
		{"a signature no sandbox made", "localhost", "", "", 401},
		{"no sandbox named", "localhost", "", "", 400},
		{"bad port", "", "sb-x", "99999", 400},
		{"bad host port", "x-sb-y.corral.test", "", "", 400},
	} {
		path := "/health"
		if c.status == 401 {
			path = "/files?path=/x&signature_expiration=1900000000&signature=v1_sb-nosuch"
		}
		req, _ := http.NewRequest("GET", envd.URL+path, nil)
		if c.host != "" {
			req.Host = c.host
		}
		if c.id != "" {
			req.Header.Set(envdSandboxHeader, c.id)
		}
		if c.port != "" {
			req.Header.Set(envdPortHeader, c.port)
		}
		resp, err := envd.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e e2bErrorBody
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.status || err != nil || e.Code != c.status || e.Message == "" {
			t.Errorf("%s: %d %+v %v, want %d in envd's shape", c.name, resp.StatusCode, e, err, c.status)
		}
	}
}

// TestEnvdFullDuplex: a request whose body is still coming when its
// node's answer has begun reaches the node whole.
func TestEnvdFullDuplex(t *testing.T) {
	st, _ := e2bCluster(t)
	s := newServer(st, testToken, testJoin, Config{LostAfter: time.Minute, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	envd := httptest.NewServer(s.EnvdHandler())
	t.Cleanup(envd.Close)
	_, body := e2bCall(t, srv, "POST", "/e2b/v2/sandboxes", e2bKeyPrefix+testToken, `{"templateID":"base"}`)
	var sb struct{ SandboxID string }
	if err := json.Unmarshal([]byte(body), &sb); err != nil || sb.SandboxID == "" {
		t.Fatalf("create: %s", body)
	}
	// A bound, so a proxy that drops the body fails the test rather
	// than hangs it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	ready := make(chan struct{})
	go func() {
		_, _ = io.WriteString(pw, "first,")
		select {
		case <-ready:
			_, _ = io.WriteString(pw, "second")
			pw.Close()
		case <-ctx.Done():
			pw.CloseWithError(ctx.Err())
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", envd.URL+"/duplex", pr)
	req.Header.Set(envdSandboxHeader, sb.SandboxID)
	resp, err := envd.Client().Do(req)
	if err != nil {
		close(ready)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	close(ready)
	if err != nil || line != "ready\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	rest, err := io.ReadAll(br)
	if want := "got \"first,second\" <nil>\n"; err != nil || string(rest) != want {
		t.Fatalf("the node got: %q %v, want %q", rest, err, want)
	}
}
