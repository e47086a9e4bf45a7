package e2e

import (
	"strings"
	"testing"
)

// A filesystem snapshot of a running sandbox becomes an image from which
// new sandboxes of either runtime start with the files present; the
// sandbox keeps running, and deletions carry over too.
func TestSnapshotFS(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, rt := range runtimes {
		t.Run("from "+rt, func(t *testing.T) {
			id := d.create("--runtime", rt)
			d.mustCLI("exec", id, "--", "sh", "-c",
				"mkdir -p /srv/app && echo from-"+rt+" > /srv/app/state && rm /etc/debian_version && echo v2 > /etc/motd")
			tag := "test/snap-" + rt + ":1"
			digest := strings.TrimSpace(d.mustCLI("snapshot", "fs", id, "-t", tag))
			if !strings.HasPrefix(digest, "sha256:") {
				t.Fatalf("snapshot printed %q", digest)
			}
			if out := d.mustCLI("exec", id, "--", "cat", "/srv/app/state"); out != "from-"+rt+"\n" {
				t.Errorf("the snapshotted sandbox lost its state: %q", out)
			}
			for _, child := range runtimes {
				out, errs, code := d.cli("", "run", "--runtime", child, "--image", tag, "--", "sh", "-c",
					"cat /srv/app/state /etc/motd; test -e /etc/debian_version && echo still-there; true")
				if code != 0 || out != "from-"+rt+"\nv2\n" {
					t.Errorf("%s sandbox from the snapshot: exit %d, %q %q", child, code, out, errs)
				}
			}
		})
	}
}
