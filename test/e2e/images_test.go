package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testImage is a two-layer image with no shell at all: the static corral
// binary as /bin/corral, and a data file in a second layer; so whatever
// runs in it comes from the image, not from the base root filesystem.
func testImage(t testing.TB) v1.Image {
	t.Helper()
	bin, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	layer := func(files map[string][]byte) v1.Layer {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for name, data := range files {
			mode := int64(0o644)
			if strings.HasPrefix(name, "bin/") {
				mode = 0o755
			}
			tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg})
			tw.Write(data)
		}
		tw.Close()
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	img, err := mutate.AppendLayers(empty.Image,
		layer(map[string][]byte{"bin/corral": bin}),
		layer(map[string][]byte{"data/copied.txt": []byte("from the image\n")}))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Env = []string{"PATH=/bin", "IMAGE_VAR=set-by-image"}
	cfg.Config.WorkingDir = "/data"
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestImageImportAndRun(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	archive := filepath.Join(t.TempDir(), "img.tar")
	ref, _ := name.ParseReference("test/tool:1")
	if err := tarball.WriteToFile(archive, ref, testImage(t)); err != nil {
		t.Fatal(err)
	}
	d.mustCLI("image", "import", archive, "-t", "test/tool:1")
	if out := d.mustCLI("image", "ls"); !strings.Contains(out, "test/tool:1") {
		t.Fatalf("image ls: %s", out)
	}
	out, errs, code := d.cli("", "run", "--image", "test/tool:1", "--", "/bin/corral", "--version")
	if code != 0 || !strings.Contains(out, "corral version") {
		t.Fatalf("running from the image: exit %d %q %q", code, out, errs)
	}
	id := d.create("--image", "test/tool:1")
	if got := d.mustCLI("fs", "get", id, "/data/copied.txt", "-"); got != "from the image\n" {
		t.Errorf("file from the image's second layer: %q", got)
	}
	if _, _, code := d.cli("", "exec", id, "--", "/bin/sh", "-c", "true"); code == 0 {
		t.Error("the base root filesystem leaked into the image's sandbox (/bin/sh ran)")
	}
	if _, _, code := d.cli("", "run", "--image", "test/nope:1", "--", "/bin/corral"); code == 0 {
		t.Error("an unknown image ran")
	}
}

// An image served by a registry on loopback is pulled and runs.
func TestImagePullFromRegistry(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	host, _ := serveTestImage(t)
	d.mustCLI("image", "pull", host+"/tools/corral:v1")
	out, errs, code := d.cli("", "run", "--image", host+"/tools/corral:v1", "--", "/bin/corral", "--version")
	if code != 0 || !strings.Contains(out, "corral version") {
		t.Fatalf("running the pulled image: exit %d %q %q", code, out, errs)
	}
}

// 20 sandboxes from one image share one copy of its layers.
func TestImageLayersShared(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	archive := filepath.Join(t.TempDir(), "img.tar")
	ref, _ := name.ParseReference("test/shared:1")
	if err := tarball.WriteToFile(archive, ref, testImage(t)); err != nil {
		t.Fatal(err)
	}
	d.mustCLI("image", "import", archive, "-t", "test/shared:1")
	store := filepath.Join(d.state, "images")
	before := du(t, store)
	var ids []string
	for i := 0; i < 20; i++ {
		ids = append(ids, d.create("--image", "test/shared:1"))
	}
	after := du(t, store)
	if after > before+1<<20 {
		t.Errorf("image store grew from %d to %d bytes for 20 sandboxes", before, after)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if n := strings.Count(string(mounts), filepath.Join(store, "mounts")); n != 1 {
		t.Errorf("%d mounts of the image for 20 sandboxes, want 1", n)
	}
	t.Logf("image store: %d bytes before, %d after 20 sandboxes", before, after)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range ids {
		d.client.Terminate(ctx, id)
	}
	d.assertNoLeaks(t, ids)
}

// du is the disk usage of dir in bytes (du -sb).
func du(t testing.TB, dir string) int64 {
	out, err := exec.Command("du", "-sb", "-x", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range strings.Fields(string(out))[0] {
		n = n*10 + int64(c-'0')
	}
	return n
}

// serveTestImage runs a registry on loopback for the test's life and
// pushes testImage to it as <host>/tools/corral:v1.
func serveTestImage(t *testing.T) (string, name.Reference) {
	t.Helper()
	reg := httptest.NewServer(registry.New())
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	ref, err := name.ParseReference(host+"/tools/corral:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, testImage(t)); err != nil {
		t.Fatal(err)
	}
	return host, ref
}
