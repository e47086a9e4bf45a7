package gvisor

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"

	"corral/internal/cgroups"
	"corral/internal/oomscore"
)

// When a sandbox reaches its memory limit the host's OOM killer picks a
// process of its cgroup by resident size. Under gVisor (systrap) that
// cgroup holds runsc's sandbox process (the Sentry: the sandbox's kernel),
// its gofer, and stub processes: one group per guest address space, and
// one stub factory that every later group is cloned from (the Sentry is
// made their parent, but they inherit the factory's OOM score). Most of
// the guest's memory is a file the Sentry owns and maps only in part, so
// the Sentry, the agent's stubs and the stubs of the process that grew
// often weigh about the same: the kernel then ended the whole sandbox,
// or took its agent, where one guest process should have died.
//
// So, once runsc has started or restored a sandbox, its stubs get scores
// that order the choice: the factory (and so every process started
// later: execs, their children) the most, the stubs already there (the
// agent; after a restore, the processes restored with it) less, and
// runsc's own processes (the Sentry, the gofer: each one's death ends
// the whole sandbox) oomscore.Above, 0 under a daemon at oomscore.Daemon.
// The host then takes a later guest process first, the agent next, the
// Sentry last, and any of them before the daemon. runsc's processes are
// set explicitly because they inherit the daemon's score when runsc forks
// them. Raising a score needs no privilege (lowering one would need
// CAP_SYS_RESOURCE, which a daemon in a container may lack).
const (
	laterOOMScoreAdj = 1000
	ownOOMScoreAdj   = 500
)

// favourStubsForOOM scores the processes of sandbox id as above.
// runsc's processes are those its state file names and those whose
// command line begins with "runsc" (a stub has none of its own); the
// factory is the stub whose parent is the Sentry and which has no child
// (each address space's group has one). Processes that end meanwhile are
// skipped.
func (r *Runtime) favourStubsForOOM(id string) error {
	pids, err := cgroups.Procs(r.cgroup(id))
	if err != nil {
		return err
	}
	keep := map[int]bool{}
	procs, _ := r.stateProcs(id)
	for _, p := range procs {
		keep[p.pid] = true
	}
	parent := map[int]int{}
	hasChild := map[int]bool{}
	for _, pid := range pids {
		if keep[pid] || isRunsc(pid) {
			keep[pid] = true
			continue
		}
		parent[pid] = ppidOf(pid)
		hasChild[parent[pid]] = true
	}
	var errs []error
	sandboxAdj := oomscore.Above()
	for pid := range keep {
		if err := oomscore.Set(pid, sandboxAdj); err != nil {
			errs = append(errs, err)
		}
	}
	for pid, pp := range parent {
		adj := ownOOMScoreAdj
		if keep[pp] && !hasChild[pid] {
			adj = laterOOMScoreAdj
		}
		if err := oomscore.Set(pid, adj); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isRunsc reports whether pid runs runsc (its argv[0] is runsc's, such as
// runsc-sandbox or runsc-gofer).
func isRunsc(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.HasPrefix(b, []byte("runsc"))
}

// ppidOf is pid's parent (field 4 of /proc/<pid>/stat), or 0.
func ppidOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(f[1])
	return pp
}
