package gvisor

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/cgroups"
	"corral/internal/oomscore"
	"corral/internal/runtime"
)

// After a start, the host's OOM killer is told whom to take first: a
// process started later (its stubs inherit the factory's score), then the
// agent's stubs, and never runsc's own processes before them, which are
// above this process (the daemon). Where it may, the test runs as the
// daemon does, at a negative score that runsc's processes inherit and
// must not keep.
func TestOOMScoresOrderTheHostsChoice(t *testing.T) {
	asDaemon(t)
	r := newRuntime(t)
	ref := start(t, r, runtime.Resources{MemoryLimitMB: 256})
	before := oomScores(t, r, ref)
	if out, err := trySh(r, ref, `sleep 30 >/dev/null 2>&1 </dev/null & echo started`, 10*time.Second); err != nil || out != "started\n" {
		t.Fatalf("starting a process: %q, %v", out, err)
	}
	after := oomScores(t, r, ref)
	seen := map[string]int{}
	for pid, adj := range after {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		_, old := before[pid]
		switch {
		case strings.HasPrefix(string(b), "runsc"):
			seen["runsc"]++
			if want := oomscore.Above(); adj != want {
				t.Errorf("runsc process %d (%q) has oom_score_adj %d, want %d", pid, b, adj, want)
			}
		case !old && before[ppidOf(pid)] != 0 && !isRunsc(ppidOf(pid)):
			// A new stub thread of an address space that was there (the
			// agent's): it keeps its group's score.
			if want := after[ppidOf(pid)]; adj != want {
				t.Errorf("new stub %d of group %d has oom_score_adj %d, want its group's %d", pid, ppidOf(pid), adj, want)
			}
		case !old:
			seen["later"]++
			if adj != laterOOMScoreAdj {
				t.Errorf("stub %d of a process started later has oom_score_adj %d, want %d", pid, adj, laterOOMScoreAdj)
			}
		default:
			seen[strconv.Itoa(adj)]++
		}
	}
	// The sandbox's own stubs: the agent's group and the factory.
	if seen["runsc"] < 2 || seen["later"] == 0 || seen[strconv.Itoa(ownOOMScoreAdj)] == 0 || seen[strconv.Itoa(laterOOMScoreAdj)] == 0 {
		t.Errorf("processes by kind: %v; want runsc's two, stubs started later, the agent's and the factory", seen)
	}
}

// oomScores maps each process of ref's cgroup to its oom_score_adj.
func oomScores(t *testing.T, r *Runtime, ref runtime.Ref) map[int]int {
	t.Helper()
	pids, err := cgroups.Procs(r.cgroup(ref.ID))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
		if err != nil {
			continue // ended meanwhile
		}
		out[pid], _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return out
}

// asDaemon lowers this process's oom_score_adj to the daemon's for the
// test, where it may (it needs CAP_SYS_RESOURCE); otherwise the test runs
// at the score it has.
func asDaemon(t *testing.T) {
	t.Helper()
	old, err := oomscore.Get(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := oomscore.LowerSelf(); err != nil {
		t.Logf("running at oom_score_adj %d: %v", old, err)
		return
	}
	t.Cleanup(func() { _ = oomscore.Set(os.Getpid(), old) })
}
