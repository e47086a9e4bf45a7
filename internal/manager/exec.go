package manager

import (
	"context"
	"io"
	"syscall"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
	"corral/internal/store"
)

// ExecParams describe a process to start in a sandbox.
type ExecParams struct {
	Args    []string
	Env     map[string]string
	Cwd     string
	User    string
	Stdin   bool
	PTY     *agentapi.PTYSize
	Timeout time.Duration
	Tag     string
}

// Process is a started process's event stream. Close releases the
// sandbox's activity count; it does not kill the process.
type Process struct {
	m       *Manager
	id      string
	stream  *agentapi.Stream
	release func()
	pid     int
}

// Exec starts a process in a running sandbox.
func (m *Manager) Exec(ctx context.Context, id string, p ExecParams) (*Process, error) {
	if err := validateExec(p); err != nil {
		return nil, err
	}
	client, l, release, err := m.agentFor(id)
	if err != nil {
		return nil, err
	}
	cwd, user := p.Cwd, p.User
	spec := l.snapshot().Spec
	if cwd == "" {
		cwd = spec.Workdir
	}
	if user == "" {
		user = spec.User
	}
	stream, err := client.Start(ctx, agentapi.StartRequest{
		Args: p.Args, Env: mergeEnvMap(spec.Env, p.Env), Cwd: cwd, User: user, Stdin: p.Stdin, PTY: p.PTY,
		TimeoutMS: p.Timeout.Milliseconds(), Tag: p.Tag,
	})
	if err != nil {
		release()
		return nil, err
	}
	return &Process{m: m, id: id, stream: stream, release: release}, nil
}

// Attach re-attaches to a running process by pid.
func (m *Manager) Attach(ctx context.Context, id string, pid int) (*Process, error) {
	client, _, release, err := m.agentFor(id)
	if err != nil {
		return nil, err
	}
	stream, err := client.Connect(ctx, pid, "")
	if err != nil {
		release()
		return nil, err
	}
	return &Process{m: m, id: id, stream: stream, release: release, pid: -1}, nil
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

// Recv returns the next event; io.EOF after the end event. Starts and ends
// are recorded in the store.
func (p *Process) Recv() (agentapi.Event, error) {
	ev, err := p.stream.Recv()
	if err != nil {
		return ev, err
	}
	switch ev.Type {
	case agentapi.EventStart:
		if p.pid == 0 {
			p.m.recordStart(p.id, ev.PID)
		}
		p.pid = ev.PID
	case agentapi.EventEnd:
		if p.pid > 0 {
			if err := p.m.store.PutProcessEnd(context.WithoutCancel(p.m.ctx), p.id, p.pid, ev.ExitCode, time.Now()); err != nil {
				p.m.log.Warn("recording process end", "sandbox", p.id, "err", err)
			}
		}
	}
	return ev, nil
}

// PID is the process id once the start event was received.
func (p *Process) PID() int { return p.pid }

// Close ends the stream and the activity it held.
func (p *Process) Close() error {
	p.release()
	return p.stream.Close()
}

func (m *Manager) recordStart(id string, pid int) {
	err := m.store.PutProcessStart(context.WithoutCancel(m.ctx), store.Process{SandboxID: id, PID: pid, StartedAt: time.Now()})
	if err != nil {
		m.log.Warn("recording process start", "sandbox", id, "err", err)
	}
}

// Processes lists the running processes of a sandbox.
func (m *Manager) Processes(ctx context.Context, id string) ([]agentapi.ProcessInfo, error) {
	client, _, release, err := m.agentFor(id)
	if err != nil {
		return nil, err
	}
	defer release()
	return client.List(ctx)
}

// Stdin streams r to a process's stdin; closeAfter closes stdin at EOF.
func (m *Manager) Stdin(ctx context.Context, id string, pid int, r io.Reader, closeAfter bool) error {
	client, _, release, err := m.agentFor(id)
	if err != nil {
		return err
	}
	defer release()
	return client.Stdin(ctx, pid, r, closeAfter)
}

// Signal sends sig to a process's group.
func (m *Manager) Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error {
	client, _, release, err := m.agentFor(id)
	if err != nil {
		return err
	}
	defer release()
	return client.Signal(ctx, pid, sig)
}

// Resize changes a PTY process's terminal size.
func (m *Manager) Resize(ctx context.Context, id string, pid int, cols, rows uint16) error {
	if cols == 0 || rows == 0 {
		return errdefs.Invalid("cols/rows", "must be positive")
	}
	client, _, release, err := m.agentFor(id)
	if err != nil {
		return err
	}
	defer release()
	return client.Resize(ctx, pid, cols, rows)
}

// Agent returns the agent client of a running sandbox for file operations;
// release must be called when the operation is over.
func (m *Manager) Agent(id string) (*agentapi.Client, func(), error) {
	client, _, release, err := m.agentFor(id)
	if err != nil {
		return nil, nil, err
	}
	return client, release, nil
}
