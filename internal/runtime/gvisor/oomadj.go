package gvisor

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"corral/internal/cgroups"
)

// When a sandbox reaches its memory limit the host's OOM killer picks a
// process of its cgroup by resident size. Under gVisor that cgroup holds
// runsc's sandbox process (the Sentry: the sandbox's kernel), its gofer,
// and one stub process per guest address space. Most of the guest's
// memory is a file the Sentry owns and maps only in part, so the Sentry
// and the stub of the guest process that grew often weigh about the
// same: the kernel then killed the Sentry as often as the stub, ending the
// whole sandbox where one guest process should have died.
//
// stubOOMScoreAdj is the oom_score_adj every stub gets, so that the host
// always takes a guest process (the largest stub) first and the sandbox
// lives on; only when no stub is left does it take the Sentry. Raising a
// score needs no privilege (lowering the Sentry's would need
// CAP_SYS_RESOURCE, which a daemon in a container may lack). Stubs are
// cloned by a stub (CLONE_PARENT makes the Sentry their parent), so the
// ones made later inherit the score.
const stubOOMScoreAdj = 1000

// favourStubsForOOM gives every stub process of sandbox id the score
// above: every process of its cgroup except runsc's own (the Sentry, the
// gofer, a runsc command at work), which its state file names and whose
// command line begins with "runsc". Processes that end meanwhile are
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
	var errs []error
	for _, pid := range pids {
		if keep[pid] || isRunsc(pid) {
			continue
		}
		if err := setOOMScoreAdj(pid, stubOOMScoreAdj); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isRunsc reports whether pid runs runsc (its argv[0] is runsc's, such as
// runsc-sandbox or runsc-gofer). A stub has no command line of its own.
func isRunsc(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.HasPrefix(b, []byte("runsc"))
}

// setOOMScoreAdj writes adj as pid's oom_score_adj; a process that has
// ended is not an error.
func setOOMScoreAdj(pid, adj int) error {
	err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(adj)), 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
