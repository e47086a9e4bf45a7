package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"corral/internal/errdefs"
	"corral/internal/image/store"
)

// testImage builds a two-layer image: a base with /etc/hello and /bin/app,
// and a top layer with /data/note.
func testImage(t *testing.T) v1.Image {
	t.Helper()
	base := tarLayer(t, map[string]string{"etc/hello": "hello\n", "bin/app": "#!/bin/sh\n"})
	top := tarLayer(t, map[string]string{"data/note": "top layer\n"})
	img, err := mutate.AppendLayers(empty.Image, base, top)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin", "GREETING=hi"}
	cf.Config.Entrypoint = []string{"/bin/app"}
	cf.Config.Cmd = []string{"--serve"}
	cf.Config.WorkingDir = "/data"
	cf.Config.User = "1000:1000"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func tarLayer(t testing.TB, files map[string]string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		hdr := &tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(files[n])), ModTime: time.Unix(1700000000, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkImage verifies that got is img in st: layers by diffID, their files,
// the config, and tag resolving to it.
func checkImage(t *testing.T, st *store.Store, img v1.Image, got store.Image, tag string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	var want []store.Digest
	for _, d := range cf.RootFS.DiffIDs {
		want = append(want, store.Digest(d.String()))
	}
	if !slices.Equal(got.Layers, want) {
		t.Fatalf("layers = %v, want %v", got.Layers, want)
	}
	for _, d := range got.Layers {
		if _, err := st.Layer(d); err != nil {
			t.Fatalf("layer %s: %v", d, err)
		}
	}
	for layer, file := range map[int]string{0: "etc/hello", 1: "data/note"} {
		p := filepath.Join(st.Root(), "layers", "sha256", got.Layers[layer].Hex(), "fs", file)
		if _, err := os.Stat(p); err != nil {
			t.Errorf("layer %d lacks %s: %v", layer, file, err)
		}
	}
	wantCfg := store.ImageConfig{Env: []string{"PATH=/bin", "GREETING=hi"}, Cmd: []string{"/bin/app", "--serve"}, Workdir: "/data", User: "1000:1000"}
	if !slices.Equal(got.Config.Env, wantCfg.Env) || !slices.Equal(got.Config.Cmd, wantCfg.Cmd) ||
		got.Config.Workdir != wantCfg.Workdir || got.Config.User != wantCfg.User {
		t.Errorf("config = %+v, want %+v", got.Config, wantCfg)
	}
	res, err := st.Resolve(tag)
	if err != nil {
		t.Fatalf("resolving %s: %v", tag, err)
	}
	if res.Digest != got.Digest {
		t.Errorf("%s resolves to %s, want %s", tag, res.Digest, got.Digest)
	}
}

// serve starts an in-process registry on 127.0.0.1 and returns its host.
func serve(t *testing.T) (string, *countingHandler) {
	t.Helper()
	h := &countingHandler{next: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), h
}

type countingHandler struct {
	next  http.Handler
	blobs atomic.Int64
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
		c.blobs.Add(1)
	}
	c.next.ServeHTTP(w, r)
}

func push(t *testing.T, img v1.Image, ref string) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

func TestPull(t *testing.T) {
	host, h := serve(t)
	img := testImage(t)
	ref := host + "/corral/test:v1"
	push(t, img, ref)
	st := openStore(t)
	ctx := context.Background()

	got, err := Pull(ctx, st, ref, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, st, img, got, ref)
	if !slices.Contains(got.Tags, ref) {
		t.Errorf("tags = %v, want %s", got.Tags, ref)
	}

	// Again: same image, no layer blob fetched, nothing new in the store.
	before, _ := st.Layers()
	h.blobs.Store(0)
	again, err := Pull(ctx, st, ref, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != got.Digest {
		t.Errorf("second pull = %s, want %s", again.Digest, got.Digest)
	}
	if n := h.blobs.Load(); n != 1 { // the config only
		t.Errorf("second pull fetched %d blobs, want 1 (config)", n)
	}
	after, _ := st.Layers()
	if len(after) != len(before) {
		t.Errorf("layers %d -> %d", len(before), len(after))
	}

	// By digest: stored, untagged.
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	byDigest, err := Pull(ctx, st, host+"/corral/test@"+d.String(), PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if byDigest.Digest != got.Digest {
		t.Errorf("by digest = %s, want %s", byDigest.Digest, got.Digest)
	}
}

func TestPullIndex(t *testing.T) {
	host, _ := serve(t)
	img := testImage(t)
	other := testImage(t) // same content, tagged arm64 in the index
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	ref := host + "/corral/multi:latest"
	r, _ := name.ParseReference(ref)
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	got, err := Pull(context.Background(), st, ref, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, st, img, got, ref)
}

func TestImportDockerArchive(t *testing.T) {
	img := testImage(t)
	p := filepath.Join(t.TempDir(), "img.tar")
	tag, _ := name.NewTag("example.com/corral/test:v1")
	if err := tarball.WriteToFile(p, tag, img); err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	got, err := Import(context.Background(), st, p, "corral/imported:v1")
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, st, img, got, "corral/imported:v1")
}

func TestImportLayout(t *testing.T) {
	img := testImage(t)
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	got, err := Import(context.Background(), st, dir, "corral/layout")
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, st, img, got, "corral/layout:latest")

	// The same layout as a tar, with a hostile extra entry that is skipped.
	p := filepath.Join(t.TempDir(), "layout.tar")
	tarDir(t, dir, p)
	st2 := openStore(t)
	got2, err := Import(context.Background(), st2, p, "corral/layout:tar")
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, st2, img, got2, "corral/layout:tar")
	if got2.Digest != got.Digest {
		t.Errorf("tar import = %s, dir import = %s", got2.Digest, got.Digest)
	}
	if ents, _ := os.ReadDir(filepath.Join(st2.Root(), "tmp")); len(ents) != 0 {
		t.Errorf("tmp not emptied: %v", ents)
	}
}

// tarDir writes the files under dir into a tar at dst, plus "../escape".
func tarDir(t testing.TB, dir, dst string) {
	t.Helper()
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "./" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte("x"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	host, _ := serve(t)
	push(t, testImage(t), host+"/corral/test:v1")
	ctx := context.Background()

	garbage := filepath.Join(t.TempDir(), "garbage.tar")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a tar "), 200), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyDir := t.TempDir()

	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()

	tests := []struct {
		name string
		run  func(st *store.Store) error
		want error
	}{
		{"missing tag", func(st *store.Store) error {
			_, err := Pull(ctx, st, host+"/corral/test:nope", PullOptions{})
			return err
		}, errdefs.ErrNotFound},
		{"missing repo", func(st *store.Store) error {
			_, err := Pull(ctx, st, host+"/corral/absent:v1", PullOptions{})
			return err
		}, errdefs.ErrNotFound},
		{"registry down", func(st *store.Store) error {
			_, err := Pull(ctx, st, down+"/corral/test:v1", PullOptions{})
			return err
		}, errdefs.ErrUnavailable},
		{"bad ref", func(st *store.Store) error {
			_, err := Pull(ctx, st, "UPPER/Case::x", PullOptions{})
			return err
		}, errdefs.ErrInvalidArgument},
		{"bad platform", func(st *store.Store) error {
			_, err := Pull(ctx, st, host+"/corral/test:v1", PullOptions{Platform: "linux/amd64/v1/x"})
			return err
		}, errdefs.ErrInvalidArgument},
		{"garbage file", func(st *store.Store) error {
			_, err := Import(ctx, st, garbage, "corral/x")
			return err
		}, errdefs.ErrInvalidArgument},
		{"empty dir", func(st *store.Store) error {
			_, err := Import(ctx, st, emptyDir, "corral/x")
			return err
		}, errdefs.ErrInvalidArgument},
		{"missing file", func(st *store.Store) error {
			_, err := Import(ctx, st, filepath.Join(emptyDir, "nope.tar"), "corral/x")
			return err
		}, errdefs.ErrNotFound},
		{"bad import ref", func(st *store.Store) error {
			_, err := Import(ctx, st, garbage, "sha256:abc")
			return err
		}, errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			err := tt.run(st)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v (%s), want %v", err, errdefs.Code(err), tt.want)
			}
			if imgs, _ := st.Images(); len(imgs) != 0 {
				t.Errorf("images left behind: %v", imgs)
			}
		})
	}
}

func TestHTTPGuard(t *testing.T) {
	var reached bool
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { reached = true; return nil, errors.New("sent") })
	for _, tt := range []struct {
		url   string
		allow bool
		sent  bool
	}{
		{"http://127.0.0.1:5000/v2/", false, true},
		{"http://localhost:5000/v2/", false, true},
		{"http://[::1]:5000/v2/", false, true},
		{"https://10.0.0.1:5000/v2/", false, true},
		{"http://10.0.0.1:5000/v2/", false, false},
		{"http://registry.local/v2/", false, false},
		{"http://10.0.0.1:5000/v2/", true, true},
	} {
		reached = false
		req := httptest.NewRequest(http.MethodGet, tt.url, nil)
		_, err := (&httpGuard{next: next, allowHTTP: tt.allow}).RoundTrip(req)
		if reached != tt.sent {
			t.Errorf("%s allow=%v: sent=%v, want %v", tt.url, tt.allow, reached, tt.sent)
		}
		if !tt.sent && !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Errorf("%s: err = %v, want permission denied", tt.url, err)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
