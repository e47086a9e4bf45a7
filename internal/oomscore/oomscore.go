// Package oomscore sets processes' oom_score_adj, the bias the kernel's
// OOM killer adds to a process's size when the host runs out of memory,
// and holds the order Corral keeps: the daemon lowest, every process of a
// sandbox above it. Memory is overcommitted for sandboxes (admission
// counts their requests three times over by default), so the host can run
// short while each sandbox is within its limit; the kernel must then end
// a sandbox, not the daemon that keeps every sandbox's state, network and
// API.
//
// The daemon lowers its own score to Daemon at start, which needs
// CAP_SYS_RESOURCE. Every process it starts inherits that score, so the
// runtimes raise what they start (raising needs no privilege): a process
// whose death ends one sandbox (runsc's Sentry and gofer, QEMU) and a
// helper a sandbox drives (a volume's NFS server) to Above, the guest
// processes' stubs of gVisor higher still. Without the capability the
// daemon keeps the score it was started with and Above is still above it.
//
// It imports nothing of Corral.
package oomscore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Daemon is the daemon's own score. Not -1000, which exempts a process
// from the OOM killer altogether: a daemon that leaks must still be
// killable, or the kernel would take every sandbox and host service
// first and then have nothing left to take. At -500 the daemon is chosen
// only once it holds half the host's memory more than the largest other
// candidate.
const Daemon = -500

// Max is the highest score the kernel takes.
const Max = 1000

// Set writes adj as pid's oom_score_adj; a process that has ended is not
// an error.
func Set(pid, adj int) error {
	err := os.WriteFile(path(pid), []byte(strconv.Itoa(adj)), 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("setting the oom_score_adj of %d: %w", pid, err)
	}
	return nil
}

// Get reads pid's oom_score_adj.
func Get(pid int) (int, error) {
	b, err := os.ReadFile(path(pid))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Above is the score of a process whose death ends one sandbox: above
// this process's own (the daemon's), and at least 0. With the daemon at
// Daemon, it is 0.
func Above() int {
	self, err := Get(os.Getpid())
	if err != nil {
		return 0
	}
	return min(Max, max(0, self+1))
}

// LowerSelf sets this process's score to Daemon. Without
// CAP_SYS_RESOURCE it fails and the score stays as it was.
func LowerSelf() error {
	return Set(os.Getpid(), Daemon)
}

func path(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/oom_score_adj" }
