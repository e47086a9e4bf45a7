package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A process started with KillTree is signalled as a tree: its timeout
// and the signals sent to it reach every descendant, not only its
// process group, which a descendant leaves with setsid or setpgid.
//
// The tree is found in /proc at the moment of the signal, two ways:
//   - parent links: every process whose parent chain leads to the
//     process (a setsid'd child whose parent lives);
//   - a marker: the process starts with treeEnv=<random> in its
//     environment, which its descendants inherit, so one orphaned to PID
//     1 (the agent, which reaps it) after its parent exited is found by
//     its /proc/PID/environ (the environment it was exec'd with).
//
// A descendant that both drops the marker from its environment and is
// orphaned escapes: this is the caller's cleanup of its own command, not
// a boundary (the sandbox is the boundary; terminating it ends all).
// No per-exec cgroup exists inside gVisor to do better, and a
// subreaper per exec would change which pid the caller sees.

// treeEnv names the marker variable.
const treeEnv = "CORRAL_EXEC_TREE"

// killRounds bounds how often a SIGKILL of a tree looks again for
// descendants forked while it was killing.
const killRounds = 8

// newTreeMarker returns a fresh marker value.
func newTreeMarker() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// signalTree sends sig to root's process group and to every process of
// its tree (marker is its marker's value). For SIGKILL it looks again
// until a round finds no one left. It returns ESRCH when it signalled
// no one.
func signalTree(root int, marker string, sig unix.Signal) error {
	hit := unix.Kill(-root, sig) == nil
	for round := 0; round < killRounds; round++ {
		found := 0
		for _, pid := range treeOf(root, marker) {
			if unix.Kill(pid, sig) == nil {
				found++
			}
		}
		hit = hit || found > 0
		if sig != unix.SIGKILL || found == 0 {
			break
		}
	}
	if !hit {
		return unix.ESRCH
	}
	return nil
}

// treeOf lists the live processes descending from root (root included)
// or carrying marker in their environment, never the agent itself.
func treeOf(root int, marker string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	var out []int
	seen := map[int]bool{}
	want := []byte(treeEnv + "=" + marker + "\x00")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if ppid, ok := readPPID(pid); ok {
			parent[pid] = ppid
		}
		if marker != "" && hasMarker(pid, want) && !seen[pid] {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	for pid := range parent {
		if !seen[pid] && descends(pid, root, parent) {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	return out
}

// descends reports whether pid is root or has it as an ancestor.
func descends(pid, root int, parent map[int]int) bool {
	for i := 0; i < 4096 && pid > 1; i++ {
		if pid == root {
			return true
		}
		pid = parent[pid]
	}
	return false
}

// readPPID reads the parent pid from /proc/PID/stat (the field after
// the state, which follows the command's closing parenthesis).
func readPPID(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}

// hasMarker reports whether pid's environment holds want.
func hasMarker(pid int, want []byte) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	return bytes.HasPrefix(b, want) || bytes.Contains(b, append([]byte{0}, want...))
}
