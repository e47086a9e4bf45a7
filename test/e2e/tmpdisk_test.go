package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// /tmp is disk, not RAM, on both runtimes: writing more than the memory
// limit into it succeeds, filling it fails with ENOSPC at the --disk
// bound, and the sandbox survives both. /dev/shm is a tmpfs of half the
// memory, and df says so.
func TestTmpOnDisk(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			id := d.create("--runtime", rt, "--memory", "256", "--disk", "0.5")
			// 384 MiB: half again the memory limit.
			out, errs, code := d.cli("", "exec", id, "--", "dd", "if=/dev/zero", "of=/tmp/big", "bs=1M", "count=384")
			if code != 0 {
				t.Fatalf("384 MiB into /tmp under a 256 MiB limit: exit %d, %q %q", code, out, errs)
			}
			out, errs, code = d.cli("", "exec", id, "--", "dd", "if=/dev/zero", "of=/tmp/more", "bs=1M", "count=400")
			if code == 0 || !strings.Contains(errs+out, "No space left") {
				t.Errorf("784 MiB into /tmp on a 512 MiB disk: exit %d, %q %q", code, out, errs)
			}
			d.mustCLI("exec", id, "--", "rm", "-f", "/tmp/big", "/tmp/more")
			if got := d.mustCLI("exec", id, "--", "sh", "-c", "echo alive > /tmp/f && cat /tmp/f"); got != "alive\n" {
				t.Errorf("after filling /tmp: %q", got)
			}
			// df -m: 1 MiB blocks; column 2 is the size.
			sizes := map[string]int{}
			for _, line := range strings.Split(d.mustCLI("exec", id, "--", "df", "-m", "--output=target,size", "/tmp", "/dev/shm"), "\n")[1:] {
				if f := strings.Fields(line); len(f) == 2 {
					sizes[f[0]], _ = strconv.Atoi(f[1])
				}
			}
			if s := sizes["/dev/shm"]; s < 100 || s > 140 {
				t.Errorf("/dev/shm is %d MiB, want half the 256 MiB memory (df: %v)", s, sizes)
			}
			// /tmp is on the root's writable layer (its mount point is /).
			if s, ok := sizes["/"]; !ok || s > 600 || s < 300 {
				t.Errorf("/tmp is not on a ~512 MiB root (df: %v)", sizes)
			}
			// What keeps runsc's tmpfs off /tmp (a mount point in the
			// writable layer) is the sandbox's, never part of its export.
			d.mustCLI("snapshot", "fs", id, "-t", "test/tmp-"+rt+":1")
			if m, _ := filepath.Glob(filepath.Join(d.state, "images/layers/sha256/*/fs/tmp/.X11-unix")); len(m) > 0 {
				t.Errorf("an exported layer holds /tmp/.X11-unix: %v", m)
			}
		})
	}
}
