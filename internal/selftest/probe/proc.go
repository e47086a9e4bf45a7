package probe

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ProcsArgs name a marker to look for in every visible command line.
type ProcsArgs struct {
	Marker string `json:"marker"`
}

// ProcsResult counts the visible processes and lists those whose command
// line holds the marker.
type ProcsResult struct {
	Visible int      `json:"visible,omitempty"`
	Found   []string `json:"found,omitempty"`
}

func procs(raw json.RawMessage) (any, error) {
	var a ProcsArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	var r ProcsResult
	self := os.Getpid() // its arguments hold the marker
	for _, pid := range visiblePIDs() {
		if pid == self {
			continue
		}
		r.Visible++
		cl := cmdline(pid)
		if a.Marker != "" && strings.Contains(cl, a.Marker) {
			r.Found = append(r.Found, fmt.Sprintf("%d: %s", pid, cl))
		}
	}
	return r, nil
}

func visiblePIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// PtraceResult lists the processes this one could attach to.
type PtraceResult struct {
	Visible  int               `json:"visible,omitempty"`
	Attached []string          `json:"attached,omitempty"` // "pid: cmdline"
	Refused  map[string]string `json:"refused,omitempty"`  // pid → errno
}

// ptraceAll attaches to (and detaches from) every visible process.
func ptraceAll(json.RawMessage) (any, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := PtraceResult{Refused: map[string]string{}}
	self := os.Getpid()
	for _, pid := range visiblePIDs() {
		if pid == self {
			continue
		}
		r.Visible++
		if err := unix.PtraceAttach(pid); err != nil {
			r.Refused[strconv.Itoa(pid)] = errnoName(err)
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WALL, nil)
		_ = unix.PtraceDetach(pid)
		r.Attached = append(r.Attached, fmt.Sprintf("%d: %s", pid, cmdline(pid)))
	}
	return r, nil
}

// ForkArgs bound the fork probe.
type ForkArgs struct {
	Max     int `json:"max,omitempty"`
	HoldMS  int `json:"hold_ms,omitempty"`
	Seconds int `json:"seconds,omitempty"`
}

// ForkResult says how many children were made and what stopped it.
type ForkResult struct {
	Children int    `json:"children,omitempty"`
	StopErr  string `json:"stop_err,omitempty"`
}

// forkUntil makes children that only wait (a raw clone: no exec, no Go
// runtime in the child) until fork fails or Max, holds them, kills them.
func forkUntil(raw json.RawMessage) (any, error) {
	a := ForkArgs{Max: 20000, Seconds: 30}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^uint64(0)
	}
	var r ForkResult
	var kids []int
	deadline := time.Now().Add(time.Duration(a.Seconds) * time.Second)
	for len(kids) < a.Max && time.Now().Before(deadline) {
		// Children start with every signal blocked, so nothing but
		// SIGKILL ever runs Go code in them.
		_ = unix.PthreadSigmask(unix.SIG_SETMASK, &all, &old)
		pid, errno := rawForkPause()
		_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
		if errno != 0 {
			r.StopErr = unix.ErrnoName(errno)
			break
		}
		kids = append(kids, pid)
	}
	r.Children = len(kids)
	time.Sleep(time.Duration(a.HoldMS) * time.Millisecond)
	for _, pid := range kids {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	for _, pid := range kids {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
	}
	return r, nil
}

// rawForkPause forks; the child pauses forever (until SIGKILL).
//
//go:nosplit
func rawForkPause() (int, unix.Errno) {
	pid, _, errno := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	if pid == 0 {
		for {
			unix.RawSyscall(unix.SYS_PAUSE, 0, 0, 0)
		}
	}
	return int(pid), 0
}

// AllocArgs ask the probe to touch MB MiB of anonymous memory, ChunkMB at a time.
type AllocArgs struct {
	MB      int `json:"mb,omitempty"`
	ChunkMB int `json:"chunk_mb,omitempty"`
}

// AllocResult says how much was touched before an error stopped it (a
// probe killed for memory prints nothing: the host sees the sandbox end).
type AllocResult struct {
	TouchedMB int    `json:"touched_mb,omitempty"`
	Err       string `json:"err,omitempty"`
}

func alloc(raw json.RawMessage) (any, error) {
	a := AllocArgs{ChunkMB: 16}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	var r AllocResult
	var keep [][]byte
	for r.TouchedMB < a.MB {
		b, err := unix.Mmap(-1, 0, a.ChunkMB<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			r.Err = errnoName(err)
			break
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
		r.TouchedMB += a.ChunkMB
	}
	runtime.KeepAlive(keep)
	return r, nil
}

// OutputArgs ask the probe to write Bytes of output to stdout as fast as possible.
type OutputArgs struct {
	Bytes int64 `json:"bytes,omitempty"`
}

func output(raw json.RawMessage) (any, error) {
	var a OutputArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	buf := []byte(strings.Repeat("corral selftest output flood\n", 2260)) // ≈ 64 KiB
	var n int64
	for n < a.Bytes {
		w, err := os.Stdout.Write(buf)
		n += int64(w)
		if err != nil {
			return map[string]any{"written": n, "err": err.Error()}, nil
		}
	}
	return map[string]any{"written": n}, nil
}

// BurnArgs ask the probe to keep Threads threads busy for Seconds.
type BurnArgs struct {
	Threads int `json:"threads,omitempty"`
	Seconds int `json:"seconds,omitempty"`
}

func burn(raw json.RawMessage) (any, error) {
	a := BurnArgs{Threads: 20, Seconds: 30}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	runtime.GOMAXPROCS(a.Threads)
	stop := time.Now().Add(time.Duration(a.Seconds) * time.Second)
	done := make(chan int)
	for i := 0; i < a.Threads; i++ {
		go func() {
			runtime.LockOSThread()
			n := 0
			for time.Now().Before(stop) {
				for j := 0; j < 1_000_000; j++ {
					n += j
				}
			}
			done <- n
		}()
	}
	for i := 0; i < a.Threads; i++ {
		<-done
	}
	return map[string]int{"threads": a.Threads}, nil
}

// OutliveArgs ask the probe to start Count detached processes whose command lines hold
// Marker and that ignore every catchable signal.
type OutliveArgs struct {
	Marker string `json:"marker"`
	Count  int    `json:"count,omitempty"`
}

// outlive starts each lingerer as a double fork: a first child in a new
// session starts the lingerer and exits, orphaning it.
func outlive(raw json.RawMessage) (any, error) {
	a := OutliveArgs{Count: 3}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	if a.Marker == "" {
		return nil, fmt.Errorf("marker is required")
	}
	for i := 0; i < a.Count; i++ {
		if err := startLinger(a.Marker, 1, true); err != nil {
			return nil, err
		}
	}
	return map[string]int{"started": a.Count}, nil
}

// LingerArgs give the stage: stage 1 starts stage 2 and exits; stage 2 ignores signals,
// starts one more lingerer (stage 3) and waits forever.
type LingerArgs struct {
	Marker string `json:"marker"`
	Stage  int    `json:"stage,omitempty"`
}

func linger(raw json.RawMessage) (any, error) {
	var a LingerArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	if a.Stage == 1 {
		return nil, startLinger(a.Marker, 2, true)
	}
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	if a.Stage == 2 {
		_ = startLinger(a.Marker, 3, false)
	}
	for { // not select{}: with nothing else to run, Go calls that a deadlock
		time.Sleep(time.Hour)
	}
}

func startLinger(marker string, stage int, setsid bool) error {
	args, _ := json.Marshal(LingerArgs{Marker: marker, Stage: stage})
	cmd := exec.Command("/proc/self/exe", Cmd, "linger", string(args))
	cmd.Args[0] = "corral-selftest-linger-" + marker
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		return err
	}
	if stage == 2 {
		// The first child waits for nothing: it exits, and the lingerer
		// is an orphan.
		return cmd.Process.Release()
	}
	if stage == 1 {
		_, err := cmd.Process.Wait()
		return err
	}
	return cmd.Process.Release()
}
