package manager

import (
	"context"
	"io"
	"path"
	"syscall"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// Processes is the exec service: processes started in running sandboxes,
// streamed, fed, signalled and resized through their agents. Nothing on
// its path writes to disk: an exec's first byte waits for the agent alone.
type Processes struct{ m *Manager }

// ExecParams describe a process to start in a sandbox.
type ExecParams struct {
	Args []string
	Env  map[string]string
	// Cwd is the working directory: the sandbox's workdir when empty, and
	// resolved against it when relative (against the user's home instead
	// with CwdFromHome, envd's rule).
	Cwd         string
	CwdFromHome bool
	// User runs the process: the sandbox's default user when empty.
	User    string
	Stdin   bool
	PTY     *agentapi.PTYSize
	Timeout time.Duration
	Tag     string
	// KillTree: the timeout and signals reach every descendant of the
	// process (agent protocol 3; an older agent refuses it: failed
	// precondition).
	KillTree bool
	// Secrets names stored secrets whose values the process gets as env
	// variables, over everything else (never recorded).
	Secrets []string
}

// Process is a started process's event stream. Close releases the
// sandbox's activity count; it does not kill the process.
type Process struct {
	stream  *agentapi.Stream
	release func()
	pid     int
	// onEnd, when set, completes the end event (an OOM kill's mark).
	onEnd func(*agentapi.Event)
	// onStart, when set, is called at the start event (telemetry.go).
	onStart func()
	// audit, when set, records the exec in the audit trail: with its end
	// event, or (nil) at Close if none came.
	audit func(*agentapi.Event)
}

// Exec starts a process in running sandbox id, with the sandbox's env
// under its own and the sandbox's user and workdir unless it names others.
func (s Processes) Exec(ctx context.Context, id string, p ExecParams) (*Process, error) {
	t0 := time.Now()
	if err := validateExec(p); err != nil {
		return nil, err
	}
	a, err := s.m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	spec := a.rec.Spec
	env := mergeEnvMap(mergeEnvMap(spec.Env, spec.SecretEnv), p.Env)
	if len(p.Secrets) > 0 {
		senv, err := s.m.secretEnv(ctx, "secrets", p.Secrets)
		if err != nil {
			a.release()
			return nil, err
		}
		env = mergeEnvMap(env, senv)
	}
	req := agentapi.StartRequest{
		Args: p.Args, Env: env, Cwd: execCwd(spec.Workdir, p),
		User: or(p.User, spec.User), Stdin: p.Stdin, PTY: p.PTY, TimeoutMS: p.Timeout.Milliseconds(), Tag: p.Tag,
		KillTree: p.KillTree,
	}
	stream, err := a.agent.Start(ctx, req)
	if err != nil {
		a.release()
		return nil, err
	}
	return &Process{stream: stream, release: a.release, onEnd: s.m.oomEnd(a.h, time.Now()), onStart: s.m.execTimer(a.h, t0), audit: s.m.auditExec(ctx, id, req)}, nil
}

// execCwd is the cwd an exec's agent gets: relative ones stay relative
// with CwdFromHome (the agent resolves them against the user's home).
func execCwd(workdir string, p ExecParams) string {
	if p.CwdFromHome && p.Cwd != "" {
		return p.Cwd
	}
	return inWorkdir(workdir, p.Cwd)
}

// inWorkdir is p resolved against the sandbox's workdir: the workdir for an
// empty p, p itself when absolute or when there is no workdir (the agent
// then resolves it against the user's home).
func inWorkdir(workdir, p string) string {
	switch {
	case p == "":
		return workdir
	case path.IsAbs(p) || workdir == "":
		return p
	}
	return path.Join(workdir, p)
}

// Attach re-attaches to a running process by pid.
func (s Processes) Attach(ctx context.Context, id string, pid int) (*Process, error) {
	a, err := s.m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	stream, err := a.agent.Connect(ctx, pid, "")
	if err != nil {
		a.release()
		return nil, err
	}
	return &Process{stream: stream, release: a.release, pid: pid, onEnd: s.m.oomEnd(a.h, time.Time{})}, nil
}

func validateExec(p ExecParams) error {
	if err := sandbox.ValidateArgv("cmd", p.Args, false); err != nil {
		return err
	}
	if err := sandbox.ValidateEnv("env", p.Env); err != nil {
		return err
	}
	if p.Timeout < 0 || p.Timeout > sandbox.MaxTimeout {
		return errdefs.Invalid("timeout", "must be between 0 and %s, got %s", sandbox.MaxTimeout, p.Timeout)
	}
	if p.PTY != nil && (p.PTY.Cols == 0 || p.PTY.Rows == 0) {
		return errdefs.Invalid("pty", "cols and rows must be positive")
	}
	if len(p.Tag) > 128 || len(p.User) > 64 || len(p.Cwd) > 4096 {
		return errdefs.Invalid("tag/user/cwd", "too long")
	}
	return nil
}

// Recv returns the next event; io.EOF after the end event.
func (p *Process) Recv() (agentapi.Event, error) {
	ev, err := p.stream.Recv()
	if err == nil && ev.Type == agentapi.EventStart {
		p.pid = ev.PID
		if p.onStart != nil {
			p.onStart()
			p.onStart = nil
		}
	}
	if err == nil && ev.Type == agentapi.EventEnd && p.onEnd != nil {
		p.onEnd(&ev)
	}
	if err == nil && ev.Type == agentapi.EventEnd && p.audit != nil {
		p.audit(&ev)
	}
	return ev, err
}

// PID is the process id once the start event was received.
func (p *Process) PID() int { return p.pid }

// Close ends the stream and the activity it held.
func (p *Process) Close() error {
	if p.audit != nil {
		p.audit(nil)
	}
	p.release()
	return p.stream.Close()
}

// List lists the running processes of a sandbox.
func (s Processes) List(ctx context.Context, id string) ([]agentapi.ProcessInfo, error) {
	a, err := s.m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	defer a.release()
	return a.agent.List(ctx)
}

// Stdin streams r to a process's stdin; closeAfter closes stdin at EOF.
func (s Processes) Stdin(ctx context.Context, id string, pid int, r io.Reader, closeAfter bool) error {
	a, err := s.m.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer a.release()
	return a.agent.Stdin(ctx, pid, r, closeAfter)
}

// Signal sends sig to a process's group.
func (s Processes) Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error {
	a, err := s.m.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer a.release()
	return a.agent.Signal(ctx, pid, sig)
}

// Resize changes a PTY process's terminal size.
func (s Processes) Resize(ctx context.Context, id string, pid int, cols, rows uint16) error {
	if cols == 0 || rows == 0 {
		return errdefs.Invalid("cols/rows", "must be positive")
	}
	a, err := s.m.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer a.release()
	return a.agent.Resize(ctx, pid, cols, rows)
}
