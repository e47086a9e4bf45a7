package envd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"syscall"

	"connectrpc.com/connect"

	"corral/internal/agentapi"
	"corral/internal/e2b/envd/gen/process"
	"corral/internal/manager"
)

// processService is process.Process over the manager's exec service. A
// stream that ends (the client goes away) leaves its process running, as
// envd does; the sandbox's end ends every stream.
type processService struct{ s *Server }

// Start starts a process and streams its events.
func (p *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	params, err := execParams(req.Msg, req.Header())
	if err != nil {
		return err
	}
	proc, err := p.s.m.Processes().Exec(ctx, sandboxID(req.Header()), params)
	if err != nil {
		return p.s.connectErr(err)
	}
	defer proc.Close()
	return p.s.pump(ctx, proc, keepalive(req.Header()), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.StartResponse{Event: ev})
	})
}

// execParams translates a StartRequest: cmd and args are the argv, stdin
// stays open unless the request says stdin=false (envd before 0.3.0 always
// kept it open).
func execParams(m *process.StartRequest, h map[string][]string) (manager.ExecParams, error) {
	cfg := m.GetProcess()
	if cfg == nil || cfg.GetCmd() == "" {
		return manager.ExecParams{}, invalid("process.cmd", "is required")
	}
	user, err := userOf(h)
	if err != nil {
		return manager.ExecParams{}, err
	}
	p := manager.ExecParams{
		Args: append([]string{cfg.GetCmd()}, cfg.GetArgs()...), Env: cfg.GetEnvs(), Cwd: cfg.GetCwd(), CwdFromHome: true,
		User: user, Stdin: m.Stdin == nil || *m.Stdin, Tag: m.GetTag(),
	}
	if m.Pty != nil {
		size := m.GetPty().GetSize()
		if size.GetCols() == 0 || size.GetRows() == 0 || size.GetCols() > math.MaxUint16 || size.GetRows() > math.MaxUint16 {
			return manager.ExecParams{}, invalid("pty.size", "cols and rows must be between 1 and 65535")
		}
		p.PTY = &agentapi.PTYSize{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())}
		p.Stdin = true
	}
	return p, nil
}

// Connect streams the events of a running process, chosen by pid or tag.
func (p *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	id := sandboxID(req.Header())
	pid, err := p.s.pidOf(ctx, id, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	proc, err := p.s.m.Processes().Attach(ctx, id, pid)
	if err != nil {
		return p.s.connectErr(err)
	}
	defer proc.Close()
	return p.s.pump(ctx, proc, keepalive(req.Header()), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.ConnectResponse{Event: ev})
	})
}

// List lists the sandbox's running processes (envs are not kept by the
// agent and come back empty).
func (p *processService) List(ctx context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	ps, err := p.s.m.Processes().List(ctx, sandboxID(req.Header()))
	if err != nil {
		return nil, p.s.connectErr(err)
	}
	out := &process.ListResponse{}
	for _, pi := range ps {
		cfg := &process.ProcessConfig{Cwd: &pi.Cwd}
		if len(pi.Args) > 0 {
			cfg.Cmd, cfg.Args = pi.Args[0], pi.Args[1:]
		}
		info := &process.ProcessInfo{Config: cfg, Pid: uint32(pi.PID)}
		if pi.Tag != "" {
			info.Tag = &pi.Tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// pidOf resolves a selector: a pid as is, a tag through the process list.
func (s *Server) pidOf(ctx context.Context, id string, sel *process.ProcessSelector) (int, error) {
	switch v := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		if v.Pid == 0 || v.Pid > math.MaxInt32 {
			return 0, invalid("process.pid", "must be a positive process id")
		}
		return int(v.Pid), nil
	case *process.ProcessSelector_Tag:
		ps, err := s.m.Processes().List(ctx, id)
		if err != nil {
			return 0, s.connectErr(err)
		}
		for _, pi := range ps {
			if pi.Tag == sel.GetTag() {
				return pi.PID, nil
			}
		}
		return 0, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found", sel.GetTag()))
	}
	return 0, invalid("process", "a pid or a tag is required")
}

// SendInput writes to a process's stdin (or its terminal).
func (p *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	id := sandboxID(req.Header())
	pid, err := p.s.pidOf(ctx, id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.s.input(ctx, id, pid, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (s *Server) input(ctx context.Context, id string, pid int, in *process.ProcessInput) error {
	data := in.GetStdin()
	if pty := in.GetPty(); pty != nil {
		data = pty
	}
	if len(data) == 0 {
		return nil
	}
	return s.connectErr(s.m.Processes().Stdin(ctx, id, pid, bytes.NewReader(data), false))
}

// StreamInput feeds a process's stdin from a client stream: a start event
// choosing the process, then data events.
func (p *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	id := sandboxID(stream.RequestHeader())
	pid := 0
	for stream.Receive() {
		msg := stream.Msg()
		switch {
		case msg.GetStart() != nil:
			var err error
			if pid, err = p.s.pidOf(ctx, id, msg.GetStart().GetProcess()); err != nil {
				return nil, err
			}
		case msg.GetData() != nil:
			if pid == 0 {
				return nil, invalid("event", "data before the start event")
			}
			if err := p.s.input(ctx, id, pid, msg.GetData().GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

// CloseStdin closes a process's stdin.
func (p *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	id := sandboxID(req.Header())
	pid, err := p.s.pidOf(ctx, id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.s.m.Processes().Stdin(ctx, id, pid, bytes.NewReader(nil), true); err != nil {
		return nil, p.s.connectErr(err)
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// SendSignal sends SIGTERM or SIGKILL.
func (p *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	default:
		return nil, invalid("signal", "SIGNAL_SIGTERM or SIGNAL_SIGKILL, got %v", req.Msg.GetSignal())
	}
	id := sandboxID(req.Header())
	pid, err := p.s.pidOf(ctx, id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.s.m.Processes().Signal(ctx, id, pid, sig); err != nil {
		return nil, p.s.connectErr(err)
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

// Update resizes a process's terminal.
func (p *processService) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	id := sandboxID(req.Header())
	pid, err := p.s.pidOf(ctx, id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty != nil {
		size := req.Msg.GetPty().GetSize()
		if size.GetCols() == 0 || size.GetRows() == 0 || size.GetCols() > math.MaxUint16 || size.GetRows() > math.MaxUint16 {
			return nil, invalid("pty.size", "cols and rows must be between 1 and 65535")
		}
		if err := p.s.m.Processes().Resize(ctx, id, pid, uint16(size.GetCols()), uint16(size.GetRows())); err != nil {
			return nil, p.s.connectErr(err)
		}
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}
