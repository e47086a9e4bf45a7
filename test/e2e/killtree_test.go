package e2e

import (
	"strings"
	"testing"
)

// exec --timeout kills the command's process group: a setsid'd child
// survives it. With --kill-tree it does not. Both runtimes; and the
// open-file limit is the same on both (1,048,576).
func TestExecKillTree(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, rt := range []string{"gvisor", "vm"} {
		t.Run(rt, func(t *testing.T) {
			id := d.create("--runtime", rt)
			sleeps := func() int {
				out := d.mustCLI("exec", id, "--", "ps", "-eo", "comm=")
				return strings.Count(out, "sleep")
			}
			const script = "setsid sleep 1000 & sleep 1000"
			_, errs, code := d.cli("", "exec", "--timeout", "1s", id, "--", "sh", "-c", script)
			if code != 124 || sleeps() != 1 {
				t.Errorf("without --kill-tree: exit %d (%q), %d sleeps left; want 124 and the setsid'd one", code, errs, sleeps())
			}
			d.mustCLI("exec", id, "--", "pkill", "sleep")
			_, errs, code = d.cli("", "exec", "--timeout", "1s", "--kill-tree", id, "--", "sh", "-c", script)
			if n := sleeps(); code != 124 || n != 0 {
				t.Errorf("--kill-tree: exit %d (%q), %d sleeps left; want 124 and none", code, errs, n)
			}
			if out := d.mustCLI("exec", id, "--", "sh", "-c", "ulimit -n; ulimit -Hn"); out != "1048576\n1048576\n" {
				t.Errorf("open-file limit (soft, hard) = %q; want 1048576 both", out)
			}
		})
	}
}
