package gvisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral/internal/cgroups"
	"corral/internal/mountinfo"
	"corral/internal/runtime"
	"corral/internal/runtime/runtimetest"
)

// TestConformance runs the shared runtime suite against gVisor with the
// real guest agent (built here from cmd/corral).
func TestConformance(t *testing.T) {
	r := newRuntime(t)
	agent := realAgent(t)
	runtimetest.Run(t, runtimetest.Env{
		Runtime: r, RootFS: env.rootfs, AgentBinary: agent, Dir: filepath.Join(env.base, "conformance"),
		Leftovers: func(ref runtime.Ref) []string { return leftoversOf(ref) },
	})
}

// leftoversOf lists what the host still has of one sandbox: processes
// naming it, mounts under its directory, its cgroup, its directory.
func leftoversOf(ref runtime.Ref) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), ref.Dir) {
			out = append(out, "process "+p)
		}
	}
	if ms, _ := mountinfo.Under(ref.Dir); len(ms) > 0 {
		out = append(out, "mounts: "+strings.Join(ms, ", "))
	}
	if ok, _ := cgroups.Exists(filepath.Join(env.cgParent, ref.ID)); ok {
		out = append(out, "cgroup "+filepath.Join(env.cgParent, ref.ID))
	}
	if _, err := os.Stat(ref.Dir); err == nil {
		out = append(out, "directory "+ref.Dir)
	}
	return out
}
