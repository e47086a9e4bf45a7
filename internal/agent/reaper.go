package agent

import (
	"os"
	"os/signal"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// reaper is the only code in this process that waits for children. As PID 1
// (or a child subreaper) the agent inherits every orphan in the sandbox, so
// it must reap them all, and it must not steal the exit status of its own
// children from the code that supervises them: one loop calls wait4(-1) and
// hands each status to the callback registered for that pid. Nothing else
// may call Wait on a child (no exec.Cmd.Wait, no os.Process.Wait).
type reaper struct {
	// mu is held across fork+register and across wait4+lookup, so a child
	// that exits at once cannot be reaped before its callback exists.
	mu      sync.Mutex
	waiters map[int]func(unix.WaitStatus)
}

// reaperSafetyNet re-runs the loop now and then in case a SIGCHLD was
// coalesced away while the loop was busy.
const reaperSafetyNet = time.Second

var (
	reaperOnce sync.Once
	theReaper  *reaper
)

// startReaper returns the process-wide reaper, starting it the first time.
func startReaper() *reaper {
	reaperOnce.Do(func() {
		theReaper = &reaper{waiters: make(map[int]func(unix.WaitStatus))}
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, unix.SIGCHLD)
		go theReaper.loop(sigs)
	})
	return theReaper
}

func (r *reaper) loop(sigs <-chan os.Signal) {
	tick := time.NewTicker(reaperSafetyNet)
	defer tick.Stop()
	for {
		select {
		case <-sigs:
		case <-tick.C:
		}
		r.reapAll()
	}
}

// reapAll reaps every child that has exited, orphans included.
func (r *reaper) reapAll() {
	for {
		fn, status, more := r.reapOne()
		if fn != nil {
			fn(status)
		}
		if !more {
			return
		}
	}
}

// reapOne reaps one child and takes its callback in the same critical
// section: once reaped, the pid may be reused by the next fork at once.
func (r *reaper) reapOne() (func(unix.WaitStatus), unix.WaitStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ws unix.WaitStatus
	pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
	if err == unix.EINTR {
		return nil, 0, true
	}
	if err != nil || pid <= 0 {
		return nil, 0, false
	}
	fn := r.waiters[pid]
	delete(r.waiters, pid)
	return fn, ws, true
}

// start runs fork (which starts a child and returns its pid) with reaping
// held off, and registers onExit for that pid before reaping resumes.
func (r *reaper) start(fork func() (int, error), onExit func(unix.WaitStatus)) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return 0, err
	}
	r.waiters[pid] = onExit
	return pid, nil
}
