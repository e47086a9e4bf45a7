package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// A filesystem snapshot says what it could not keep: the FIFO and device
// node a sandbox made are left out of the image and listed, in the API's
// answer and by the CLI; the rest of the sandbox's files are in it. A
// socket is left out too, unlisted (neither runtime's export carries one).
func TestSnapshotFSLeftOut(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			id := d.create("--runtime", rt)
			// The device node needs CAP_MKNOD, which a sandbox's root has;
			// the list is checked against what exists.
			made := d.mustCLI("exec", id, "--", "sh", "-c", `mkdir -p /srv/x && echo kept > /srv/x/file && mkfifo /srv/x/fifo &&
python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/srv/x/sock")' &&
(mknod /srv/x/null c 1 3 2>/dev/null || true) && ls /srv/x`)
			want := []string{"/srv/x/fifo"}
			if strings.Contains(made, "null") {
				want = append(want, "/srv/x/null")
			}
			res, err := d.client.SnapshotFS(context.Background(), id, "test/leftout-"+rt+":1")
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Sorted(slices.Values(res.LeftOut))
			if !slices.Equal(got, want) || res.LeftOutCount != len(want) {
				t.Errorf("left out %v (%d), want %v", res.LeftOut, res.LeftOutCount, want)
			}
			_, errs, code := d.cli("", "snapshot", "fs", id)
			if code != 0 || !strings.Contains(errs, "left out") || !strings.Contains(errs, "/srv/x/fifo") {
				t.Errorf("CLI: exit %d, stderr %q: want a warning naming /srv/x/fifo", code, errs)
			}
			out, errs, code := d.cli("", "run", "--runtime", rt, "--image", "test/leftout-"+rt+":1", "--", "ls", "/srv/x")
			if code != 0 || out != "file\n" {
				t.Errorf("a sandbox of the snapshot: exit %d, ls %q %q; want only the file", code, out, errs)
			}
		})
	}
}
