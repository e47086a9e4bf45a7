package agent

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// processStart is POST /v1/process/start: start a process and stream its
// events. The process outlives this stream.
func (s *Server) processStart(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.StartRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := validateStart(&req); err != nil {
		return err
	}
	l, err := s.prepare(&req)
	if err != nil {
		return err
	}
	p, err := s.procs.add(req.Tag, func() (*process, error) { return s.spawn(&req, l) })
	if err != nil {
		return fmt.Errorf("starting %q: %w", req.Args[0], err)
	}
	s.log.Debug("process started", "op", "process", "pid", p.pid(), "args", req.Args)
	s.streamEvents(w, r, p)
	return nil
}

// spawn forks the process and starts supervising it. It runs with the
// process table locked (see table.add).
func (s *Server) spawn(req *agentapi.StartRequest, l *launch) (*process, error) {
	sio, err := openStdio(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errdefs.ErrResourceExhausted, err)
	}
	defer sio.closeChild()
	p := &process{
		info: agentapi.ProcessInfo{
			Tag: req.Tag, Args: req.Args, Cwd: l.cwd, PTY: req.PTY != nil, StartedAt: time.Now().UTC(),
		},
		out:       newHub(),
		log:       s.log,
		stdin:     sio.stdin,
		stdinSem:  make(chan struct{}, 1),
		ptmx:      sio.ptmx,
		exited:    make(chan struct{}),
		done:      make(chan struct{}),
		oomBefore: oomKills(),
	}
	if req.Log {
		p.console = s.console
	}
	if req.KillTree {
		p.tree = newTreeMarker()
		l.env = append(l.env, treeEnv+"="+p.tree)
	}
	pid, err := s.fork(l, sio, req.PTY != nil, p.onExit)
	if err != nil {
		sio.closeParent()
		return nil, forkError(l.path, err)
	}
	p.info.PID = pid
	if req.TimeoutMS > 0 {
		p.startTimeout(time.Duration(req.TimeoutMS) * time.Millisecond)
	}
	go p.supervise(sio.readers, sio.types, s.procs.retire)
	return p, nil
}

// forkError classifies a failed fork/exec: the request's fault when the
// executable cannot be run, the sandbox's when it is out of resources.
func forkError(path string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err
	}
	switch errno {
	case syscall.EACCES, syscall.EPERM:
		return fmt.Errorf("%w: executing %s: %v", errdefs.ErrPermissionDenied, path, err)
	case syscall.ENOENT, syscall.ENOEXEC, syscall.ENOTDIR, syscall.ELOOP, syscall.E2BIG, syscall.EISDIR:
		return fmt.Errorf("%w: executing %s: %v", errdefs.ErrInvalidArgument, path, err)
	case syscall.EAGAIN, syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE:
		return fmt.Errorf("%w: executing %s: %v", errdefs.ErrResourceExhausted, path, err)
	}
	return fmt.Errorf("executing %s: %w", path, os.NewSyscallError("fork/exec", err))
}
