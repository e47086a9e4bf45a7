package gvisor

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// proc is a host process, identified by pid and start time so that a
// recycled pid is never mistaken for it.
type proc struct {
	pid   int
	start string // field 22 of /proc/<pid>/stat
}

// lookupProc returns pid as a proc if it runs now.
func lookupProc(pid int) (proc, bool) {
	start, state, ok := procStat(pid)
	if !ok || state == "Z" || state == "X" {
		return proc{}, false
	}
	return proc{pid: pid, start: start}, true
}

// alive reports whether p still runs (a zombie has exited).
func (p proc) alive() bool {
	start, state, ok := procStat(p.pid)
	return ok && start == p.start && state != "Z" && state != "X"
}

// kill sends SIGKILL to p if it is still the same process.
func (p proc) kill() {
	if p.alive() {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// procStat returns the start time and state of pid from /proc/<pid>/stat.
func procStat(pid int) (start, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", "", false
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// remaining fields start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", "", false
	}
	return f[19], f[0], true // fields 22 and 3
}

// pidsOf lists the pids of procs, for messages.
func pidsOf(procs []proc) []int {
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.pid
	}
	return pids
}

// runscState is the part of runsc's private state file that names the
// host processes of a container.
type runscState struct {
	GoferPid int `json:"goferPid"`
	Sandbox  *struct {
		Pid int `json:"pid"`
	} `json:"sandbox"`
}

// stateProcs returns the sandbox and gofer processes recorded in runsc's
// state file for id, those that run now, and whether the file names both
// (runsc create got past starting them, so they are in the sandbox's
// cgroup). It is best effort: the file format is runsc's own, and
// bundleProcs finds the same processes another way.
func (r *Runtime) stateProcs(id string) (procs []proc, complete bool) {
	b, err := os.ReadFile(filepath.Join(r.cfg.Root, id+"_sandbox:"+id+".state"))
	if err != nil {
		return nil, false
	}
	var st runscState
	if err := json.Unmarshal(b, &st); err != nil {
		r.log.Debug("unreadable runsc state file", "sandbox", id, "err", err)
		return nil, false
	}
	pids := []int{st.GoferPid}
	if st.Sandbox != nil {
		pids = append(pids, st.Sandbox.Pid)
	}
	complete = len(pids) == 2
	for _, pid := range pids {
		if pid <= 0 {
			complete = false
			continue
		}
		if p, ok := lookupProc(pid); ok {
			procs = append(procs, p)
		}
	}
	return procs, complete
}

// bundleProcs returns every running process whose command line names
// bundle: runsc's sandbox and gofer processes (and any runsc command still
// working on the sandbox) carry --bundle=<bundle>. It reads the command
// line of every process on the host, which takes time in proportion to the
// sandboxes there (≈ 100 ms at 400: ≈ 6 processes each).
func bundleProcs(bundle string) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var procs []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(bundle)) {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if !slices.ContainsFunc(args, func(a string) bool {
			return a == bundle || strings.HasSuffix(a, "="+bundle)
		}) {
			continue
		}
		if p, ok := lookupProc(pid); ok {
			procs = append(procs, p)
		}
	}
	return procs
}
