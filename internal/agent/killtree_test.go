package agent

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
)

// A timeout kills the process group; with KillTree it kills every
// descendant: one in a session of its own (setsid) whose parent lives,
// and one orphaned by its parent (found by the marker in its
// environment).
func TestProcessKillTree(t *testing.T) {
	env := newEnv(t, "")
	const script = `setsid sleep 1000 & echo $!; (setsid sleep 1001 & echo $!); sleep 1000`
	for _, tree := range []bool{false, true} {
		res := env.run(t, agentapi.StartRequest{Args: []string{"sh", "-c", script}, TimeoutMS: 700, KillTree: tree})
		if !res.end.TimedOut {
			t.Fatalf("kill_tree %v: end %+v; want timed out", tree, res.end)
		}
		var pids []int
		for _, f := range strings.Fields(res.stdout.String()) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("stdout %q", res.stdout.String())
			}
			pids = append(pids, pid)
		}
		if len(pids) != 2 {
			t.Fatalf("kill_tree %v: stdout %q; want two pids", tree, res.stdout.String())
		}
		for _, pid := range pids {
			if tree {
				waitFor(t, "descendant "+strconv.Itoa(pid)+" killed", func() bool { return !alive(pid) })
				continue
			}
			// Without KillTree the setsid'd ones survive the timeout.
			if !alive(pid) {
				t.Errorf("without kill_tree, setsid'd pid %d died with the process group", pid)
			}
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}
