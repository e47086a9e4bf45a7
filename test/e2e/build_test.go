package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// build writes spec into dir as spec.yaml and runs `corral image build`
// there; it returns stdout, stderr and the exit code.
func (d *daemon) build(dir, spec string, args ...string) (string, string, int) {
	d.t.Helper()
	f := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(f, []byte(spec), 0o644); err != nil {
		d.t.Fatal(err)
	}
	return d.cli("", append([]string{"image", "build", "-f", f}, args...)...)
}

func (d *daemon) mustBuild(dir, spec string, args ...string) (string, string) {
	d.t.Helper()
	out, errs, code := d.build(dir, spec, args...)
	if code != 0 {
		d.t.Fatalf("image build: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	return strings.TrimSpace(out), errs
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// stepLines returns, per step number (0: base), the final progress line.
func stepLines(stderr string) map[string]string {
	out := map[string]string{}
	re := regexp.MustCompile(`^\[(base|\d+)/?\d*\] .*: (CACHED|done in .*|FAILED.*)$`)
	for _, l := range strings.Split(stderr, "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			out[m[1]] = m[2]
		}
	}
	return out
}

const cowSpec = `base: debian:bookworm
steps:
  - apt_install: [cowsay]
  - copy: {src: ./app, dst: /opt/app}
  - run: echo "built from $(cat /opt/app/hello.txt)" > /opt/app/built.txt
  - run: touch /opt/app/after-RUN
  - env: {GREETING: hi}
  - workdir: /opt/app
cmd: [/usr/games/cowsay, hi]
`

// The must-show: apt_install, copy and run make an image in which
// cowsay runs and the copied files are; the same spec again is all cached;
// a changed run step rebuilds itself and what follows, nothing before.
func TestImageBuildCowsay(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"app/hello.txt": "hello\n", "app/sub/data.txt": "data\n"})
	digest, errs := d.mustBuild(dir, cowSpec, "-t", "test/cow:1")
	if !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("build printed %q, want the digest", digest)
	}
	t.Logf("first build:\n%s", errs)
	out := d.mustCLI("run", "--image", "test/cow:1", "--", "/usr/games/cowsay", "hi")
	if !strings.Contains(out, "< hi >") || !strings.Contains(out, "(oo)") {
		t.Fatalf("cowsay printed %q", out)
	}
	if out := d.mustCLI("run", "--image", "test/cow:1"); !strings.Contains(out, "< hi >") {
		t.Errorf("the image's default command printed %q", out)
	}
	out = d.mustCLI("run", "--image", "test/cow:1", "--", "sh", "-c",
		`cat hello.txt sub/data.txt built.txt; echo "$GREETING $(pwd)"; ls after-RUN`)
	if want := "hello\ndata\nbuilt from hello\nhi /opt/app\nafter-RUN\n"; out != want {
		t.Errorf("the image's files and config: %q, want %q", out, want)
	}

	start := time.Now()
	again, errs := d.mustBuild(dir, cowSpec, "-t", "test/cow:1")
	t.Logf("rebuild of the same spec took %s:\n%s", time.Since(start).Round(time.Millisecond), errs)
	if again != digest {
		t.Errorf("the same spec built %s, then %s", digest, again)
	}
	for step, status := range stepLines(errs) {
		if status != "CACHED" {
			t.Errorf("rebuild: step %s was %q, want CACHED", step, status)
		}
	}
	if n := len(stepLines(errs)); n != 7 {
		t.Errorf("rebuild reported %d steps, want 7 (base and 6):\n%s", n, errs)
	}

	changed := strings.Replace(cowSpec, "built from", "BUILT FROM", 1)
	_, errs = d.mustBuild(dir, changed, "-t", "test/cow:2")
	lines := stepLines(errs)
	for _, s := range []string{"base", "1", "2"} {
		if lines[s] != "CACHED" {
			t.Errorf("after changing step 3, step %s was %q, want CACHED", s, lines[s])
		}
	}
	for _, s := range []string{"3", "4", "6"} {
		if !strings.HasPrefix(lines[s], "done in") {
			t.Errorf("after changing step 3, step %s was %q, want run again", s, lines[s])
		}
	}
	if out := d.mustCLI("run", "--image", "test/cow:2", "--", "cat", "/opt/app/built.txt"); out != "BUILT FROM hello\n" {
		t.Errorf("rebuilt step's file: %q", out)
	}
}

// A failed step shows its output and exit code, adds no layer, and leaves
// no build sandbox running.
func TestImageBuildFailedStep(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	dir := t.TempDir()
	d.mustBuild(dir, "base: debian:bookworm\n", "-t", "test/base:1")
	layers := filepath.Join(d.state, "images", "layers", "sha256")
	before, _ := os.ReadDir(layers)
	out, errs, code := d.build(dir, `base: debian:bookworm
steps:
  - run: |
      echo partial > /half-done
      echo about to fail
      exit 3
`, "-t", "test/fails:1")
	if code == 0 {
		t.Fatalf("a failing step built: %s", out)
	}
	if !strings.Contains(errs, "about to fail") || !strings.Contains(errs, "exit code 3") {
		t.Errorf("the failure does not show the step's output and exit code:\n%s", errs)
	}
	after, _ := os.ReadDir(layers)
	if len(after) != len(before) {
		t.Errorf("the failed step left a layer: %d layers before, %d after", len(before), len(after))
	}
	if _, _, code := d.cli("", "image", "inspect", "test/fails:1"); code == 0 {
		t.Error("the failed build was tagged")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs, err := d.client.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sb := range sbs {
		if sb.State != "terminated" {
			t.Errorf("build sandbox %s is %s after the build ended", sb.ID, sb.State)
		}
		ids = append(ids, sb.ID)
	}
	if len(ids) == 0 {
		t.Error("the failed step ran in no sandbox")
	}
	d.assertNoLeaks(t, ids)
}

// Two concurrent builds of one spec run each step once.
func TestImageBuildConcurrentRunsOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	spec := `base: debian:bookworm
steps:
  - run: sleep 2; date +%s%N > /stamp
`
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errss := make([]string, 2)
	codes := make([]int, 2)
	for i := range 2 {
		dir := t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errss[i], codes[i] = d.build(dir, spec)
		}()
	}
	wg.Wait()
	ran := 0
	for i := range 2 {
		if codes[i] != 0 {
			t.Fatalf("build %d: exit %d\n%s", i, codes[i], errss[i])
		}
		if strings.HasPrefix(stepLines(errss[i])["1"], "done in") {
			ran++
		}
	}
	if ran != 1 || outs[0] != outs[1] {
		t.Errorf("the step ran %d times (want 1); digests %q and %q\n%s\n%s", ran, outs[0], outs[1], errss[0], errss[1])
	}
}

// pip_install from a local wheel through find-links (PyPI is unreachable
// here), as the configured user.
func TestImageBuildPipFindLinks(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	dir := t.TempDir()
	writeWheel(t, filepath.Join(dir, "wheels"), "corralprobe", "1.0", `VALUE = "from a local wheel"`)
	_, errs := d.mustBuild(dir, `base: debian:bookworm
steps:
  - apt_install: [python3-pip]
  - copy: {src: ./wheels, dst: /opt/wheels}
  - pip_install: {packages: [corralprobe==1.0], find_links: [/opt/wheels], no_index: true}
  - user: nobody
`, "-t", "test/pip:1")
	t.Logf("build:\n%s", errs)
	out := d.mustCLI("run", "--image", "test/pip:1", "--", "python3", "-c", "import corralprobe, os; print(corralprobe.VALUE, os.getuid())")
	if out != "from a local wheel 65534\n" {
		t.Errorf("the installed package (as nobody): %q", out)
	}
}

// writeWheel writes a minimal pure-Python wheel into dir.
func writeWheel(t *testing.T, dir, name, version, body string) {
	t.Helper()
	info := fmt.Sprintf("%s-%s.dist-info", name, version)
	files := []struct{ name, body string }{
		{name + "/__init__.py", body + "\n"},
		{info + "/METADATA", fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)},
		{info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: corral-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", info)
	w, err := zw.Create(info + "/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s-py3-none-any.whl", name, version)), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// npm_install from the npm registry. npm itself comes from the registry
// too (Debian's npm package pulls in hundreds of packages). Where the host
// trusts extra certificate authorities (a TLS-inspecting egress proxy),
// the image is given them, as a user behind such a proxy would.
func TestImageBuildNpm(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	dir := t.TempDir()
	var caSteps string
	if cas, _ := filepath.Glob("/usr/local/share/ca-certificates/*.crt"); len(cas) > 0 {
		for _, ca := range cas {
			b, err := os.ReadFile(ca)
			if err != nil {
				t.Fatal(err)
			}
			writeFiles(t, dir, map[string]string{"cas/" + filepath.Base(ca): string(b)})
		}
		caSteps = `  - copy: {src: ./cas, dst: /usr/local/share/ca-certificates}
  - run: update-ca-certificates
`
	}
	_, errs := d.mustBuild(dir, `base: debian:bookworm
steps:
`+caSteps+`  - env: {NODE_EXTRA_CA_CERTS: /etc/ssl/certs/ca-certificates.crt}
  - apt_install: [nodejs]
  - run: >-
      curl -fsSLo /tmp/npm.tgz https://registry.npmjs.org/npm/-/npm-10.8.2.tgz &&
      tar -xzf /tmp/npm.tgz -C /tmp &&
      node /tmp/package/bin/npm-cli.js install --global /tmp/npm.tgz &&
      rm -rf /tmp/package /tmp/npm.tgz
  - npm_install: [is-number@7.0.0]
`, "-t", "test/npm:1")
	t.Logf("build:\n%s", errs)
	out := d.mustCLI("run", "--image", "test/npm:1", "--", "sh", "-c", `NODE_PATH=$(npm root -g) node -e 'console.log(require("is-number")(5))'`)
	if out != "true\n" {
		t.Errorf("the installed npm package: %q", out)
	}
}

// A build starts from an image a registry serves (pulled by the daemon)
// and from a docker-archive tarball (imported by the CLI); a copy step
// needs no shell in the image.
func TestImageBuildFromImages(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	host, ref := serveTestImage(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"extra/note.txt": "added by the build\n"})
	archive := filepath.Join(dir, "img.tar")
	if err := tarball.WriteToFile(archive, ref, testImage(t)); err != nil {
		t.Fatal(err)
	}
	for base, tag := range map[string]string{host + "/tools/corral:v1": "test/from-registry:1", "./img.tar": "test/from-archive:1"} {
		_, errs := d.mustBuild(dir, fmt.Sprintf(`base: %s
steps:
  - copy: {src: ./extra, dst: /data/extra}
`, base), "-t", tag)
		t.Logf("build from %s:\n%s", base, errs)
		for _, path := range []string{"/data/extra/note.txt", "/data/copied.txt"} {
			if _, _, code := d.cli("", "run", "--image", tag, "--", "/bin/corral", "--version"); code != 0 {
				t.Errorf("%s: the base image's binary does not run", tag)
			}
			id := d.create("--image", tag)
			if got := d.mustCLI("fs", "get", id, path, "-"); got == "" {
				t.Errorf("%s: %s is empty", tag, path)
			}
		}
	}
}

// A Debian base with extra packages is built with mmdebstrap.
func TestImageBuildDebianPackages(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	_, errs := d.mustBuild(t.TempDir(), "base: {debian: bookworm, packages: [cowsay]}\n", "-t", "test/debpkgs:1")
	t.Logf("build:\n%s", errs)
	if out := d.mustCLI("run", "--image", "test/debpkgs:1", "--", "/usr/games/cowsay", "moo"); !strings.Contains(out, "< moo >") {
		t.Errorf("cowsay from the base's packages: %q", out)
	}
}
