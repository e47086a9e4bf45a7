package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// fakeBuildDaemon serves the image build endpoints from memory.
type fakeBuildDaemon struct {
	mu       sync.Mutex
	layers   map[string]bool
	uploads  int
	imported [][]string // entry names of each imported tar
	builds   []apiv1.BuildRequest
	events   []apiv1.BuildEvent // the build's answer
}

func newFakeBuildDaemon(t *testing.T) (*fakeBuildDaemon, *corral.Client) {
	f := &fakeBuildDaemon{layers: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/images/layers/{digest}", f.layer)
	mux.HandleFunc("POST /v1/images/layers", f.upload)
	mux.HandleFunc("POST /v1/images/import", f.importImage)
	mux.HandleFunc("POST /v1/images/build", f.build)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, corral.New(srv.URL, "token")
}

func (f *fakeBuildDaemon) layer(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.layers[r.PathValue("digest")] {
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(apiv1.Error{Error: apiv1.ErrorDetail{Code: "not_found", Message: "no such layer"}})
		return
	}
	json.NewEncoder(w).Encode(apiv1.LayerInfo{Digest: r.PathValue("digest")})
}

func (f *fakeBuildDaemon) upload(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	n, _ := io.Copy(h, r.Body)
	digest := "sha256:" + hex.EncodeToString(h.Sum(nil))
	f.mu.Lock()
	f.layers[digest] = true
	f.uploads++
	f.mu.Unlock()
	json.NewEncoder(w).Encode(apiv1.LayerInfo{Digest: digest, Size: n})
}

func (f *fakeBuildDaemon) importImage(w http.ResponseWriter, r *http.Request) {
	var names []string
	tr := tar.NewReader(r.Body)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, hdr.Name)
	}
	f.mu.Lock()
	f.imported = append(f.imported, names)
	f.mu.Unlock()
	json.NewEncoder(w).Encode(apiv1.Image{Digest: "sha256:imported"})
}

func (f *fakeBuildDaemon) build(w http.ResponseWriter, r *http.Request) {
	var req apiv1.BuildRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.builds = append(f.builds, req)
	f.mu.Unlock()
	enc := json.NewEncoder(w)
	for _, ev := range f.events {
		enc.Encode(ev)
	}
}

// buildDir makes a spec directory: corral.yaml, app/ and an OCI layout.
func buildDir(t *testing.T) string {
	dir := t.TempDir()
	mkTestFile(t, filepath.Join(dir, "app", "main.py"), "print('hi')\n")
	mkTestFile(t, filepath.Join(dir, "layout", "oci-layout"), `{"imageLayoutVersion":"1.0.0"}`)
	mkTestFile(t, filepath.Join(dir, "layout", "index.json"), `{}`)
	mkTestFile(t, filepath.Join(dir, "corral.yaml"), "base: ./layout\nsteps:\n  - copy: {src: ./app, dst: /opt/app}\n  - run: python3 /opt/app/main.py\n")
	return dir
}

func mkTestFile(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRunImageBuild(t *testing.T) {
	dir := buildDir(t)
	f, c := newFakeBuildDaemon(t)
	f.events = []apiv1.BuildEvent{
		{Type: apiv1.BuildEventStep, Step: 1, Steps: 2, Name: "copy ./app", Status: apiv1.StepCached},
		{Type: apiv1.BuildEventStep, Step: 2, Steps: 2, Name: "run python3", Status: apiv1.StepRunning},
		{Type: apiv1.BuildEventOutput, Step: 2, Data: []byte("hi\n")},
		{Type: apiv1.BuildEventStep, Step: 2, Steps: 2, Status: apiv1.StepDone, Seconds: 1},
		{Type: apiv1.BuildEventDone, Image: &apiv1.Image{Digest: "sha256:built"}},
	}
	flags := imageBuildFlags{file: filepath.Join(dir, "corral.yaml"), tag: "demo:1", progress: "plain"}
	for run := range 2 {
		var stdout, stderr bytes.Buffer
		if err := runImageBuild(context.Background(), c, flags, nil, &stdout, &stderr); err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, stderr.String())
		}
		if stdout.String() != "sha256:built\n" {
			t.Errorf("run %d: stdout %q, want the digest alone", run, stdout.String())
		}
		if !strings.Contains(stderr.String(), "    hi\n") || !strings.Contains(stderr.String(), "built sha256:built as demo:1") {
			t.Errorf("run %d: stderr lacks the output or the summary:\n%s", run, stderr.String())
		}
	}
	if f.uploads != 1 {
		t.Errorf("%d uploads, want 1 (the second build finds the layer)", f.uploads)
	}
	var tarred bytes.Buffer
	want, _, err := copyLayer(&tarred, filepath.Join(dir, "app"), "/opt/app")
	if err != nil {
		t.Fatal(err)
	}
	req := f.builds[0]
	if cp := req.Spec.Steps[0].Copy; cp.Layer != want || cp.Src != "./app" || cp.Dst != "/opt/app" {
		t.Errorf("copy step sent as %+v, want layer %s", cp, want)
	}
	if req.Spec.Base.Image != "sha256:imported" || req.Tag != "demo:1" {
		t.Errorf("sent base %+v and tag %q, want the imported digest and demo:1", req.Spec.Base, req.Tag)
	}
	if got := strings.Join(f.imported[0], " "); got != "index.json oci-layout" {
		t.Errorf("imported a tar of %q, want the layout's files at its root", got)
	}
}

func TestRunImageBuildFails(t *testing.T) {
	t.Run("missing copy src", func(t *testing.T) {
		dir := buildDir(t)
		mkTestFile(t, filepath.Join(dir, "corral.yaml"), "base: debian:bookworm\nsteps:\n  - run: true\n  - copy: {src: ./nope, dst: /x}\n")
		f, c := newFakeBuildDaemon(t)
		err := runImageBuild(context.Background(), c, imageBuildFlags{file: filepath.Join(dir, "corral.yaml"), progress: "plain"}, nil, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "step 2") || !strings.Contains(err.Error(), "./nope") {
			t.Errorf("err %v, want one naming step 2 and ./nope", err)
		}
		if len(f.builds) != 0 {
			t.Error("a build was started")
		}
	})
	t.Run("build error", func(t *testing.T) {
		f, c := newFakeBuildDaemon(t)
		code := 2
		f.events = []apiv1.BuildEvent{
			{Type: apiv1.BuildEventStep, Step: 1, Steps: 1, Name: "run false", Status: apiv1.StepFailed, ExitCode: &code},
			{Type: apiv1.BuildEventError, Error: &apiv1.ErrorDetail{Code: "failed_precondition", Message: "step 1 (run false) exited with code 2"}},
		}
		var stdout, stderr bytes.Buffer
		err := runImageBuild(context.Background(), c, imageBuildFlags{file: "-", quiet: true, progress: "plain"},
			strings.NewReader("base: debian:bookworm\nsteps: [{run: 'false'}]\n"), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "exited with code 2") || !strings.Contains(err.Error(), "stdin") {
			t.Errorf("err %v, want the build's error, naming stdin", err)
		}
		if stdout.Len() != 0 || stderr.String() != "[1/1] run false: FAILED (exit code 2)\n" {
			t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
		}
	})
}

// TestCopyLayerDigestStable: a copy step's cache key changes with content,
// not with times.
func TestCopyLayerDigestStable(t *testing.T) {
	dir := buildDir(t)
	app := filepath.Join(dir, "app")
	first, _, err := copyLayer(io.Discard, app, "/opt/app")
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	for _, p := range []string{app, filepath.Join(app, "main.py")} {
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	touched, _, _ := copyLayer(io.Discard, app, "/opt/app")
	if touched != first {
		t.Errorf("digest changed with mtimes: %s then %s", first, touched)
	}
	elsewhere, _, _ := copyLayer(io.Discard, app, "/srv/app")
	mkTestFile(t, filepath.Join(app, "main.py"), "print('bye')\n")
	changed, _, _ := copyLayer(io.Discard, app, "/opt/app")
	if elsewhere == first || changed == first {
		t.Errorf("digest the same for another dst (%v) or other content (%v)", elsewhere == first, changed == first)
	}
}
