package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/pgtest"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

func TestClusterRef(t *testing.T) {
	for in, want := range map[string]string{
		"app":                    "app:latest",
		"app:1":                  "app:1",
		"reg:5000/app":           "reg:5000/app:latest",
		"reg:5000/app:2":         "reg:5000/app:2",
		"sha256:" + hex64("a"):   "sha256:" + hex64("a"),
		"test/cluster:1":         "test/cluster:1",
		"localhost:5000/x/y:tag": "localhost:5000/x/y:tag",
	} {
		if got := clusterRef(in); got != want {
			t.Errorf("clusterRef(%q) = %q, want %q", in, got, want)
		}
	}
}

func hex64(c string) string { return strings.Repeat(c, 64) }

// The build watcher passes the stream through unchanged, read a byte at
// a time, and records the done event's image only; a line past the bound
// is not read as an event.
func TestBuildWatcher(t *testing.T) {
	long := `{"type":"done","image":{"digest":"sha256:long","x":"` + strings.Repeat("x", maxEventLine) + `"}}`
	stream := `{"type":"step","step":1}` + "\n" + long + "\n" + `{"type":"done","image":{"digest":"sha256:d1","tags":["app:1"]}}` + "\n"
	var got []apiv1.Image
	w := &buildWatcher{rc: io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))), record: func(img apiv1.Image) { got = append(got, img) }}
	out, err := io.ReadAll(w)
	if err != nil || string(out) != stream {
		t.Fatalf("passed through %d bytes of %d, %v", len(out), len(stream), err)
	}
	if len(got) != 1 || got[0].Digest != "sha256:d1" || len(got[0].Tags) != 1 {
		t.Fatalf("recorded %+v, want sha256:d1 only", got)
	}
}

// imageNode is a fake node for image calls: it insists on its
// credential and logs each call as "METHOD path body".
type imageNode struct {
	cred  string
	mu    sync.Mutex
	calls []string
}

func (f *imageNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" || !nodeauth.Equal(r.Header.Get(nodeauth.Header), f.cred) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.calls = append(f.calls, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+string(b)))
	f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/images/build":
		_, _ = io.WriteString(w, `{"type":"step","step":1}`+"\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, `{"type":"done","image":{"digest":"sha256:d1","tags":["app:1"],"size":5}}`+"\n")
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, nodeauth.ImagesPath):
		_, _ = io.WriteString(w, `{}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes":
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"sb-`+strings.ReplaceAll(r.Host, ":", "-")+fmt.Sprint(len(f.calls))+`","created_at":"2026-12-03T05:00:00Z"}`)
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *imageNode) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// A build through the control plane runs on the node asked for and is
// recorded there when its done event passes; a create of its tag placed
// on another node makes that node fetch it first (by digest, with the
// tag), one placed on the holder does not; a delete reaches the holder
// and forgets the image.
func TestImageCallsThroughControl(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	nodes := map[string]*imageNode{}
	for id, zone := range map[string]string{"n1": "a", "n2": "b"} {
		nonce := nodeauth.NewNonce()
		f := &imageNode{cred: nodeauth.Credential(testJoin, id, nonce)}
		srv := httptest.NewTLSServer(f)
		t.Cleanup(srv.Close)
		nodes[id] = f
		if err := st.Register(ctx, store.Node{ID: id, Address: srv.URL, CPUMilli: 4000, MemoryMB: 4096, DiskMB: 1 << 20, MaxSandboxes: 10,
			Runtimes: []string{"gvisor"}, Labels: map[string]string{"zone": zone}, CredentialNonce: nonce, CredentialHash: nodeauth.Hash(f.cred)}); err != nil {
			t.Fatal(err)
		}
		pin(t, st, id, nodeauth.Hash(f.cred), srv)
	}
	srv := controlFor(t, st, testJoin)

	status, body := call(t, srv, "POST", "/v1/images/build?node=n1", testToken, `{"spec":{}}`)
	if status != http.StatusOK || !strings.Contains(body, `"step"`) || !strings.Contains(body, "sha256:d1") {
		t.Fatalf("build through the control plane: %d %s", status, body)
	}
	if got := nodes["n1"].log(); len(got) != 1 || got[0] != `POST /v1/images/build {"spec":{}}` || len(nodes["n2"].log()) != 0 {
		t.Fatalf("the build reached n1 as %q and n2 as %q", got, nodes["n2"].log())
	}
	hs, err := st.ImageHolders(ctx, "app:1")
	if err != nil || len(hs) != 1 || hs[0].Node != "n1" || hs[0].Digest != "sha256:d1" || hs[0].Size != 5 {
		t.Fatalf("holders of app:1 after the build: %+v, %v", hs, err)
	}

	if status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{"image":"app:1","node_selector":{"zone":"b"}}`); status != http.StatusCreated {
		t.Fatalf("create on n2: %d %s", status, body)
	}
	want := []string{nodeauth.ImagesPath + `sha256:d1/fetch {"tags":["app:1"]}`, "/v1/sandboxes"}
	got := nodes["n2"].log()
	if len(got) != 2 || got[0] != "POST "+want[0] || !strings.HasPrefix(got[1], "POST "+want[1]) {
		t.Fatalf("n2 was asked %q; want a fetch, then the create", got)
	}
	if status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{"image":"app","node_selector":{"zone":"a"}}`); status != http.StatusCreated {
		t.Fatalf("create on n1: %d %s", status, body)
	}
	if got := nodes["n1"].log(); len(got) != 2 || !strings.HasPrefix(got[1], "POST /v1/sandboxes") {
		t.Fatalf("n1, which holds the image, was asked %q", got)
	}

	if status, body := call(t, srv, "DELETE", "/v1/images/sha256:d1", testToken, ""); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, body)
	}
	if got := nodes["n1"].log(); got[len(got)-1] != "DELETE /v1/images/sha256:d1" {
		t.Fatalf("n1's last call %q, want the delete", got[len(got)-1])
	}
	if _, err := st.ImageHolders(ctx, "sha256:d1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("holders after the delete: %v", err)
	}
}
