package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// leftovers lists what the host still has of the given sandboxes: processes
// naming them, mounts, cgroups (v1 controllers or v2) and directories.
func (d *daemon) leftovers(ids []string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, id := range ids {
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err == nil && strings.Contains(string(b), id) {
				out = append(out, "process "+p+": "+strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
		for _, line := range strings.Split(string(mounts), "\n") {
			if strings.Contains(line, id) {
				out = append(out, "mount: "+line)
			}
		}
		var cgs []string
		for _, parent := range []string{"corral", "corral-vm"} {
			v1, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent + "/" + id)
			cgs = append(cgs, v1...)
			if v2 := "/sys/fs/cgroup/" + parent + "/" + id; exists(v2) {
				cgs = append(cgs, v2)
			}
		}
		for _, cg := range cgs {
			out = append(out, "cgroup: "+cg)
		}
		// The sandbox's directory (bundle, sockets, the vm's disks) and the
		// vm runtime's index entry.
		for _, p := range []string{filepath.Join(d.state, "sandboxes", id), filepath.Join(d.state, "vm", "sandboxes", id)} {
			if exists(p) {
				out = append(out, "file: "+p)
			}
		}
	}
	return out
}

// assertNoLeaks fails if anything of ids remains, allowing a short grace
// period for processes that are being reaped.
func (d *daemon) assertNoLeaks(t *testing.T, ids []string) {
	t.Helper()
	var left []string
	if poll(5*time.Second, func() bool { left = d.leftovers(ids); return len(left) == 0 }) {
		return
	}
	t.Fatalf("leaked after terminate:\n%s", strings.Join(left, "\n"))
}
