package e2e

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// helloArchive is a `docker save` tarball of a one-layer image whose
// command is the static corral binary printing its version.
func helloArchive(t *testing.T, dir string) string {
	t.Helper()
	bin, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(bin)
	tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Cmd = []string{"/hello", "--version"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference("test/hello:1")
	p := filepath.Join(dir, "hello.tar")
	if err := tarball.WriteToFile(p, ref, img); err != nil {
		t.Fatal(err)
	}
	return p
}

// Docker runs in a vm sandbox: dockerd (Debian's docker.io, in an image
// built here) starts, loads an image from a tarball and runs it. In a
// gVisor sandbox the same fails.
func TestVMDocker(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	dir := t.TempDir()
	_, errs := d.mustBuild(dir, "base: debian:bookworm\nsteps:\n  - apt_install: [docker.io, kmod]\n", "-t", "test/docker:1")
	t.Logf("build:\n%s", lastLines(errs, 12))
	archive := helloArchive(t, dir)

	id := d.create("--runtime", "vm", "--image", "test/docker:1", "--memory", "2048", "--timeout", "20m")
	d.mustCLI("fs", "put", id, archive, "/root/hello.tar")
	d.mustCLI("exec", "-d", id, "--", "sh", "-c", "dockerd >/var/log/dockerd.log 2>&1")
	if !d.waitFor(id, 3*time.Minute, "docker", "info") {
		log, _, _ := d.cli("", "exec", id, "--", "tail", "-20", "/var/log/dockerd.log")
		t.Fatalf("dockerd did not come up in the vm:\n%s", log)
	}
	d.mustCLI("exec", id, "--", "docker", "load", "-i", "/root/hello.tar")
	out, errs, code := d.cli("", "exec", id, "--", "docker", "run", "--rm", "--network", "none", "test/hello:1")
	if code != 0 || !strings.Contains(out, "corral version") {
		t.Fatalf("docker run in the vm: exit %d, %q %q", code, out, errs)
	}

	gv := d.create("--image", "test/docker:1", "--memory", "1024")
	d.mustCLI("fs", "put", gv, archive, "/root/hello.tar")
	d.mustCLI("exec", "-d", gv, "--", "sh", "-c", "dockerd >/var/log/dockerd.log 2>&1")
	// Up, or already gone (dockerd may die at once in gVisor).
	d.waitFor(gv, 20*time.Second, "sh", "-c", "docker info >/dev/null 2>&1 || ! pgrep -x dockerd >/dev/null")
	out, errs, code = d.cli("", "exec", gv, "--", "sh", "-c", "docker load -i /root/hello.tar && docker run --rm --network none test/hello:1")
	if code == 0 || strings.Contains(out, "corral version") {
		t.Errorf("docker run in gvisor should fail: exit %d, %q %q", code, out, errs)
	}
	log, _, _ := d.cli("", "exec", gv, "--", "tail", "-3", "/var/log/dockerd.log")
	t.Logf("in gvisor, docker says %q; dockerd's log ends:\n%s", lastLines(errs, 2), log)
}

// waitFor runs cmd in id until it succeeds or timeout passes.
func (d *daemon) waitFor(id string, timeout time.Duration, cmd ...string) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, _, code := d.cli("", append([]string{"exec", id, "--"}, cmd...)...); code == 0 {
			return true
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
