package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/manager"
)

// ptyShell runs bash where the image has it and sh otherwise.
var ptyShell = []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l"}

// ptyMessage is a text frame on a PTY WebSocket: resize from the client,
// exit (the process ended) from the daemon.
type ptyMessage struct {
	Type     string `json:"type"`
	Cols     uint16 `json:"cols,omitempty"`
	Rows     uint16 `json:"rows,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Error    string `json:"error,omitempty"`
}

// openPTY serves GET /v1/sandboxes/{id}/pty: it starts a process (cmd
// query values, a login shell by default) on a new terminal of cols x rows
// and upgrades to a WebSocket that relays it. Binary frames are the
// terminal's bytes both ways; text frames are JSON: {"type":"resize",
// "cols","rows"} from the client, {"type":"exit","exit_code"} from the
// daemon before it closes. The process is killed when the socket goes.
func (s *Server) openPTY(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.writeError(w, errdefs.Invalid("Upgrade", "this endpoint is a WebSocket: send a WebSocket handshake (Upgrade: websocket)"))
		return
	}
	p, err := ptyParams(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	id := r.PathValue("id")
	// The process starts before the upgrade, so that a sandbox that is not
	// running or a command that cannot start is a JSON error.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	proc, err := s.m.Processes().Exec(ctx, id, p)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer proc.Close()
	first, err := proc.Recv()
	switch {
	case err != nil:
		s.writeError(w, fmt.Errorf("%w: the terminal's process did not start: %s", errdefs.ErrUnavailable, s.lostProcess(r.Context(), id, err)))
		return
	case first.Type != agentapi.EventStart:
		s.writeError(w, fmt.Errorf("%w: the terminal's process did not start: %s %s", errdefs.ErrFailedPrecondition, first.Type, first.Error))
		return
	}
	defer s.endPTY(r.Context(), id, proc.PID())
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the client
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	go s.ptyInput(ctx, cancel, c, id, proc.PID())
	s.ptyOutput(ctx, c, proc)
}

func ptyParams(r *http.Request) (manager.ExecParams, error) {
	q := r.URL.Query()
	size := func(name string, def uint16) (uint16, error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return 0, errdefs.Invalid(name, "must be an integer in 1..1000, got %q", v)
		}
		return uint16(n), nil
	}
	cols, err := size("cols", 80)
	if err != nil {
		return manager.ExecParams{}, err
	}
	rows, err := size("rows", 24)
	if err != nil {
		return manager.ExecParams{}, err
	}
	cmd := q["cmd"]
	if len(cmd) == 0 {
		cmd = ptyShell
	}
	return manager.ExecParams{Args: cmd, Env: map[string]string{"TERM": "xterm-256color"}, Stdin: true,
		PTY: &agentapi.PTYSize{Cols: cols, Rows: rows}, Cwd: q.Get("cwd"), User: q.Get("user")}, nil
}

// ptyInput relays the client's frames: binary to the process's stdin,
// resize messages to its terminal. It cancels ctx when the client goes.
func (s *Server) ptyInput(ctx context.Context, cancel context.CancelFunc, c *websocket.Conn, id string, pid int) {
	defer cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		err := s.m.Processes().Stdin(ctx, id, pid, pr, true)
		pr.CloseWithError(errOr(err, io.EOF))
	}()
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			if _, err := pw.Write(data); err != nil {
				return
			}
			continue
		}
		var m ptyMessage
		if json.Unmarshal(data, &m) != nil || m.Type != "resize" {
			_ = c.Close(websocket.StatusUnsupportedData, `text frames must be {"type":"resize","cols":N,"rows":N}`)
			return
		}
		if err := s.m.Processes().Resize(ctx, id, pid, m.Cols, m.Rows); err != nil && errors.Is(err, errdefs.ErrInvalidArgument) {
			_ = c.Close(websocket.StatusPolicyViolation, "resize: cols and rows must be positive")
			return
		}
	}
}

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// ptyOutput relays the process's output until it ends, then says how.
func (s *Server) ptyOutput(ctx context.Context, c *websocket.Conn, proc *manager.Process) {
	for {
		ev, err := proc.Recv()
		if err != nil {
			code := -1
			_ = writePTYMessage(ctx, c, ptyMessage{Type: "exit", ExitCode: &code, Error: "the terminal's stream ended: " + s.red.String(err.Error())})
			_ = c.Close(websocket.StatusInternalError, "stream lost")
			return
		}
		switch ev.Type {
		case agentapi.EventStdout, agentapi.EventStderr, agentapi.EventPTY:
			if err := c.Write(ctx, websocket.MessageBinary, ev.Data); err != nil {
				return
			}
		case agentapi.EventEnd:
			code := ev.ExitCode
			_ = writePTYMessage(ctx, c, ptyMessage{Type: "exit", ExitCode: &code, Error: ev.Error})
			_ = c.Close(websocket.StatusNormalClosure, "process ended")
			return
		}
	}
}

func writePTYMessage(ctx context.Context, c *websocket.Conn, m ptyMessage) error {
	b, _ := json.Marshal(m)
	return c.Write(ctx, websocket.MessageText, b)
}

// endPTY kills the terminal's process (and its group) once its socket is
// gone; not found: it had ended already.
func (s *Server) endPTY(ctx context.Context, id string, pid int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := s.m.Processes().Signal(ctx, id, pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrFailedPrecondition) && !errors.Is(err, errdefs.ErrUnavailable) {
		s.log.WarnContext(ctx, "killing a closed terminal's process", "sandbox", id, "pid", pid, "err", err)
	}
}
