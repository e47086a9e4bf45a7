package e2e

import (
	"slices"
	"strings"
	"testing"
)

// defaultsSpec is an image whose processes run as nobody in /srv/app.
const defaultsSpec = `base: debian:bookworm
steps:
  - run: mkdir -p /srv/app && echo marker > /srv/app/marker
  - workdir: /srv/app
  - user: nobody
`

// The must-show: in a sandbox of an image that sets user nobody
// and workdir /srv/app, an upload without a user is owned by nobody and
// lands relative to the workdir, an exec runs as nobody in it, a relative
// path means the same to every file call, and all of it holds the same for
// a sandbox from a warm pool of that image as for a cold one.
func TestImageDefaultsForFilesAndExec(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustBuild(t.TempDir(), defaultsSpec, "-t", "test/defaults:1")
	cold := d.create("--image", "test/defaults:1")
	want := d.checkDefaults(t, cold)

	// The same image from a warm pool.
	d.stop()
	d.net = append(d.net, "--warm-pool-spec", "size=1,image=test/defaults:1")
	d.start()
	d.poolReady(1)
	pooled := d.sandboxDirs()
	warm := d.create("--image", "test/defaults:1")
	if !slices.Contains(pooled, warm) {
		t.Fatalf("the create got %s, not the pooled sandbox (%v)", warm, pooled)
	}
	if got := d.checkDefaults(t, warm); got != want {
		t.Errorf("from the warm pool: %q; cold: %q", got, want)
	}

	// --user and --workdir given at create still win over the image's.
	other := d.create("--image", "test/defaults:1", "--user", "root", "--workdir", "/tmp")
	if out := d.mustCLI("exec", other, "--", "sh", "-c", "id -un; pwd"); out != "root\n/tmp\n" {
		t.Errorf("create --user root --workdir /tmp: %q", out)
	}
	// fs --user overrides the sandbox's user for one call.
	d.mustCLI("fs", "put", "--user", "root", cold, "-", "rootfile")
	if out := d.mustCLI("exec", cold, "--", "stat", "-c", "%U %n", "/srv/app/rootfile"); out != "root /srv/app/rootfile\n" {
		t.Errorf("fs put --user root: %q", out)
	}
}

// checkDefaults uploads, lists and execs in sandbox id the image's
// defaults must shape, and returns what it saw (for comparing two
// sandboxes).
func (d *daemon) checkDefaults(t *testing.T, id string) string {
	t.Helper()
	if _, errs, code := d.cli("hello\n", "fs", "put", id, "-", "data/in.txt"); code != 0 {
		t.Fatalf("fs put: %s", errs)
	}
	owners := d.mustCLI("exec", id, "--", "stat", "-c", "%U %n", "/srv/app/data", "/srv/app/data/in.txt")
	if owners != "nobody /srv/app/data\nnobody /srv/app/data/in.txt\n" {
		t.Errorf("%s: the upload without --user: %q, want it and its new parent owned by nobody under /srv/app", id, owners)
	}
	who := d.mustCLI("exec", id, "--", "sh", "-c", "id -un; pwd; cat data/in.txt marker")
	if who != "nobody\n/srv/app\nhello\nmarker\n" {
		t.Errorf("%s: exec without --user or -w: %q, want nobody in /srv/app", id, who)
	}
	if out := d.mustCLI("exec", id, "-w", "data", "--", "pwd"); out != "/srv/app/data\n" {
		t.Errorf("%s: a relative -w: %q, want it under the workdir", id, out)
	}
	got := d.mustCLI("fs", "get", id, "data/in.txt", "-")
	if got != "hello\n" {
		t.Errorf("%s: fs get of a relative path: %q", id, got)
	}
	ls := d.mustCLI("fs", "ls", id, "data")
	if !strings.Contains(ls, "nobody") || !strings.Contains(ls, "/srv/app/data/in.txt") {
		t.Errorf("%s: fs ls data: %q", id, ls)
	}
	d.mustCLI("fs", "mkdir", id, "made/deep")
	if out := d.mustCLI("exec", id, "--", "stat", "-c", "%U", "/srv/app/made", "/srv/app/made/deep"); out != "nobody\nnobody\n" {
		t.Errorf("%s: fs mkdir without --user: owners %q", id, out)
	}
	d.mustCLI("fs", "rm", "-r", id, "made")
	return owners + who + got
}
