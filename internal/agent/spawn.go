package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// defaultPath is the PATH of a process when neither its env nor the agent's
// has one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// maxTimeout bounds timeout_ms so that it fits a time.Duration.
const maxTimeout = 100 * 365 * 24 * time.Hour

// launch is everything needed to fork one process, resolved from a
// StartRequest.
type launch struct {
	path string   // executable, absolute
	argv []string // as requested
	env  []string
	dir  string // host path of the working directory
	cwd  string // the same, inside the sandbox
	acct account
}

// validateStart checks a StartRequest's shape before anything is resolved.
func validateStart(req *agentapi.StartRequest) error {
	if len(req.Args) == 0 || req.Args[0] == "" {
		return errdefs.Invalid("args", "empty")
	}
	for _, a := range req.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return errdefs.Invalid("args", "an argument contains a NUL byte")
		}
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return errdefs.Invalid("env", "bad variable %q", k)
		}
	}
	if req.TimeoutMS < 0 || time.Duration(req.TimeoutMS) > maxTimeout/time.Millisecond {
		return errdefs.Invalid("timeout_ms", "%d out of range", req.TimeoutMS)
	}
	if len(req.Tag) > maxTagLen {
		return errdefs.Invalid("tag", "longer than %d bytes", maxTagLen)
	}
	if req.PTY != nil && (req.PTY.Cols == 0 || req.PTY.Rows == 0) {
		return errdefs.Invalid("pty", "zero size")
	}
	return nil
}

// prepare resolves the user, environment, working directory and executable.
func (s *Server) prepare(req *agentapi.StartRequest) (*launch, error) {
	acct, err := s.lookupUser(req.User)
	if err != nil {
		return nil, err
	}
	l := &launch{argv: req.Args, acct: acct}
	l.env = buildEnv(os.Environ(), acct, req.Env, req.PTY != nil)
	if l.cwd, l.dir, err = s.workDir(req.Cwd, acct.home); err != nil {
		return nil, err
	}
	if l.path, err = lookPath(req.Args[0], envValue(l.env, "PATH"), l.dir); err != nil {
		return nil, err
	}
	return l, nil
}

// buildEnv merges, in increasing precedence: the agent's environment, the
// user's HOME/USER/LOGNAME (and TERM for a terminal), and the request's env.
func buildEnv(base []string, acct account, extra map[string]string, tty bool) []string {
	m := make(map[string]string, len(base)+len(extra)+4)
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	m["HOME"], m["USER"], m["LOGNAME"] = acct.home, acct.name, acct.name
	if m["PATH"] == "" {
		m["PATH"] = defaultPath
	}
	if tty && m["TERM"] == "" {
		m["TERM"] = "xterm-256color"
	}
	for k, v := range extra {
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// workDir resolves the working directory: cwd, or the home directory when
// cwd is empty (or "/" when the home does not exist, like nobody's).
func (s *Server) workDir(cwd, home string) (sandbox, host string, err error) {
	explicit := cwd != ""
	if !explicit {
		cwd = home
	}
	sandbox, err = sandboxPath(cwd, home)
	if err == nil {
		host, err = s.resolve(sandbox, true)
	}
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(host); err == nil && !fi.IsDir() {
			err = syscall.ENOTDIR
		}
	}
	switch {
	case err == nil:
		return sandbox, host, nil
	case !explicit:
		return "/", s.root, nil
	default:
		return "", "", errdefs.Invalid("cwd", "%s: %v", cwd, err)
	}
}

// lookPath finds file in the PATH list, as execvp does; a name with a slash
// is taken as it is (relative to dir).
func lookPath(file, pathList, dir string) (string, error) {
	if strings.Contains(file, "/") {
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		if err := checkExecutable(file); err != nil {
			return "", execError(file, err)
		}
		return file, nil
	}
	for _, d := range filepath.SplitList(pathList) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		candidate := filepath.Join(d, file)
		if checkExecutable(candidate) == nil {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("%w: args: executable %q not found in PATH", errdefs.ErrNotFound, file)
}

// execError classifies why a named executable cannot run, so callers can
// answer as a shell does (127 missing, 126 not executable).
func execError(file string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: args: executable %s not found", errdefs.ErrNotFound, file)
	}
	return fmt.Errorf("%w: args: %s cannot be executed: %v", errdefs.ErrPermissionDenied, file, err)
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not executable")
	}
	return nil
}

// stdio holds the three descriptors a child gets and the parent's ends.
type stdio struct {
	child   [3]*os.File
	readers []*os.File // output, parent side
	types   []string   // event type per reader
	stdin   *os.File   // parent's write end (the PTY master with a PTY), nil for /dev/null
	ptmx    *os.File
}

// openStdio makes pipes (or a terminal) for a process. The caller closes
// the child's ends after the fork, and the parent's ends if the fork fails.
func openStdio(req *agentapi.StartRequest) (*stdio, error) {
	if req.PTY != nil {
		return openPTYStdio(*req.PTY)
	}
	sio := &stdio{}
	if req.Stdin {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		sio.child[0], sio.stdin = r, w
	} else {
		null, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		sio.child[0] = null
	}
	for i, typ := range []string{agentapi.EventStdout, agentapi.EventStderr} {
		r, w, err := os.Pipe()
		if err != nil {
			sio.closeChild()
			sio.closeParent()
			return nil, err
		}
		sio.child[i+1] = w
		sio.readers = append(sio.readers, r)
		sio.types = append(sio.types, typ)
	}
	return sio, nil
}

func openPTYStdio(size agentapi.PTYSize) (*stdio, error) {
	ptmx, tty, err := openPTY(size)
	if err != nil {
		return nil, err
	}
	return &stdio{
		child:   [3]*os.File{tty, tty, tty},
		readers: []*os.File{ptmx},
		types:   []string{agentapi.EventPTY},
		stdin:   ptmx,
		ptmx:    ptmx,
	}, nil
}

// openPTY opens a terminal pair. pty.Open leaves the master in blocking mode
// (it calls Fd), and a blocking read could not be interrupted when the
// process has exited but a background child still holds the terminal; a
// non-blocking duplicate is pollable, so read deadlines and Close work.
func openPTY(size agentapi.PTYSize) (master, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("opening a terminal: %w", err)
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	m.Close()
	if err == nil {
		err = unix.SetNonblock(fd, true)
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		tty.Close()
		return nil, nil, fmt.Errorf("opening a terminal: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := setWinsize(master, size); err != nil {
		master.Close()
		tty.Close()
		return nil, nil, err
	}
	return master, tty, nil
}

// setWinsize sets a terminal's size without making the master blocking.
func setWinsize(master *os.File, size agentapi.PTYSize) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ioctlErr error
	err = rc.Control(func(fd uintptr) {
		ws := &unix.Winsize{Row: size.Rows, Col: size.Cols}
		ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws)
	})
	if err == nil {
		err = ioctlErr
	}
	if err != nil {
		return fmt.Errorf("setting terminal size: %w", err)
	}
	return nil
}

// closeChild closes the child's ends once the child has them (or on failure).
func (sio *stdio) closeChild() {
	seen := map[*os.File]bool{}
	for _, f := range sio.child {
		if f != nil && !seen[f] {
			seen[f] = true
			f.Close()
		}
	}
}

// closeParent closes the parent's ends when the fork failed.
func (sio *stdio) closeParent() {
	for _, f := range sio.readers {
		f.Close()
	}
	if sio.stdin != nil && sio.stdin != sio.ptmx {
		sio.stdin.Close()
	}
}

// sysProcAttr puts the child in its own process group (a new session with a
// controlling terminal for a PTY) and switches to the user, with no
// supplementary groups.
func sysProcAttr(acct account, tty bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: !tty, Setsid: tty, Setctty: tty, Ctty: 0}
	self := int(acct.uid) == os.Getuid() && int(acct.gid) == os.Getgid()
	if os.Getuid() == 0 || !self {
		// An unprivileged agent (a developer's) can only run as itself.
		attr.Credential = &syscall.Credential{Uid: acct.uid, Gid: acct.gid, Groups: []uint32{}}
	}
	return attr
}

// fork starts the child; the reaper calls onExit with its status.
func (s *Server) fork(l *launch, sio *stdio, tty bool, onExit func(unix.WaitStatus)) (int, error) {
	attr := &os.ProcAttr{
		Dir:   l.dir,
		Env:   l.env,
		Files: sio.child[:],
		Sys:   sysProcAttr(l.acct, tty),
	}
	return s.reaper.start(func() (int, error) {
		proc, err := os.StartProcess(l.path, l.argv, attr)
		if err != nil {
			return 0, err
		}
		pid := proc.Pid
		_ = proc.Release() // the reaper waits for it, never os.Process
		return pid, nil
	}, onExit)
}
