package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cgroup2Mount is where a cgroup2 hierarchy is mounted ("" if none).
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		before, after, ok := strings.Cut(sc.Text(), " - ")
		if fields := strings.Fields(before); ok && strings.HasPrefix(after, "cgroup2 ") && len(fields) > 4 {
			return fields[4]
		}
	}
	return ""
}

// TestNodeEntrypointCgroup: the node image's entrypoint, at the root of a
// private cgroup namespace (as a container on a cgroup v2 host), moves the
// container's processes into a child group, leaves the root empty so that
// controllers can be enabled for the sandboxes' groups, and runs corral
// with the container's args.
func TestNodeEntrypointCgroup(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("not root: no cgroup namespace to try the node entrypoint in")
	}
	mnt := cgroup2Mount(t)
	if mnt == "" {
		t.Skip("no cgroup2 hierarchy mounted")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare is not installed")
	}
	entry, err := filepath.Abs("../../deploy/docker/node-entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	// The container: a group of its own, entered by a shell that then
	// makes a cgroup namespace rooted there and mounts cgroup2 where a
	// container sees it. A second process stands for what else runs in
	// the container at start.
	group, err := os.MkdirTemp(mnt, "corral-deploy-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(filepath.Join(group, "daemon"))
		os.Remove(group)
	})
	fake := filepath.Join(t.TempDir(), "corral")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"args=$*\"\necho \"self=$(grep ^0:: /proc/self/cgroup)\"\necho \"root=$(cat /sys/fs/cgroup/cgroup.procs | wc -l)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `echo $$ >"$GROUP/cgroup.procs" && exec "$UNSHARE" --cgroup --mount --fork sh -c '
		mount -t cgroup2 none /sys/fs/cgroup || exit 1
		sleep 60 & pid=$!
		sh "$ENTRY" serve --node; kill $pid'`
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "GROUP="+group, "UNSHARE="+unshare, "ENTRY="+entry, "CORRAL_BIN="+fake)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the entrypoint: %v", err)
	}
	for _, want := range []string{"args=serve --node", "self=0::/daemon", "root=0"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("want %q in the output", want)
		}
	}
}
