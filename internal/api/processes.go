package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"

	"golang.org/x/sys/unix"
)

func (s *Server) execProcess(w http.ResponseWriter, r *http.Request) {
	var req apiv1.ExecRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	timeout, err := seconds("timeout", req.Timeout, sandbox.MaxTimeout)
	if err != nil {
		s.writeError(w, err)
		return
	}
	p := manager.ExecParams{Args: req.Cmd, Env: req.Env, Cwd: req.Cwd, User: req.User, Stdin: req.Stdin, Timeout: timeout, Tag: req.Tag, KillTree: req.KillTree, Secrets: req.Secrets}
	if req.PTY != nil {
		p.PTY = &agentapi.PTYSize{Cols: req.PTY.Cols, Rows: req.PTY.Rows}
	}
	id := r.PathValue("id")
	// The agent stream lives as long as this request; a background process
	// outlives it, a foreground one is killed when the caller goes away.
	proc, err := s.m.Processes().Exec(r.Context(), id, p)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer proc.Close()
	ended := s.streamEvents(w, r.Context(), id, proc)
	if !ended && !req.Background && proc.PID() > 0 {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		// Not found: it ended meanwhile; failed precondition or unavailable:
		// the sandbox is going away, taking the process with it.
		if err := s.m.Processes().Signal(ctx, id, proc.PID(), syscall.SIGKILL); err != nil && !errors.Is(err, errdefs.ErrNotFound) &&
			!errors.Is(err, errdefs.ErrFailedPrecondition) && !errors.Is(err, errdefs.ErrUnavailable) {
			s.log.WarnContext(ctx, "killing abandoned process", "sandbox", id, "pid", proc.PID(), "err", err)
		}
	}
}

type eventSource interface {
	Recv() (agentapi.Event, error)
}

// streamEvents writes events as NDJSON until the end event (true) or until
// the stream or the client goes away (false). A stream lost with sandbox
// id's agent ends with an end event saying why, as far as known.
func (s *Server) streamEvents(w http.ResponseWriter, ctx context.Context, id string, src eventSource) bool {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	for {
		ev, err := src.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = enc.Encode(apiv1.ExecEvent{Type: apiv1.EventEnd, ExitCode: -1, Error: s.lostProcess(ctx, id, err)})
			}
			return false
		}
		out := apiv1.ExecEvent{Type: ev.Type, PID: ev.PID, Data: ev.Data, ExitCode: ev.ExitCode, Signal: ev.Signal, TimedOut: ev.TimedOut,
			OOMKilled: ev.OOMKilled, Error: ev.Error}
		if err := enc.Encode(out); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		if ev.Type == agentapi.EventEnd {
			return true
		}
	}
}

func pidOf(r *http.Request) (int, error) {
	pid, err := strconv.Atoi(r.PathValue("pid"))
	if err != nil || pid <= 0 {
		return 0, errdefs.Invalid("pid", "must be a positive integer, got %q", r.PathValue("pid"))
	}
	return pid, nil
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request) {
	ps, err := s.m.Processes().List(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.ProcessList{Processes: []apiv1.Process{}}
	for _, p := range ps {
		out.Processes = append(out.Processes, apiv1.Process{PID: p.PID, Tag: p.Tag, Cmd: p.Args, Cwd: p.Cwd, PTY: p.PTY, StartedAt: p.StartedAt})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) attachProcess(w http.ResponseWriter, r *http.Request) {
	pid, err := pidOf(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	proc, err := s.m.Processes().Attach(r.Context(), r.PathValue("id"), pid)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer proc.Close()
	s.streamEvents(w, r.Context(), r.PathValue("id"), proc)
}

// processStdin streams the request body to the process's stdin as it
// arrives; close=true closes stdin when the body ends.
func (s *Server) processStdin(w http.ResponseWriter, r *http.Request) {
	pid, err := pidOf(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	closeAfter := r.URL.Query().Get("close") == "true" || r.URL.Query().Get("close") == "1"
	if err := s.m.Processes().Stdin(r.Context(), r.PathValue("id"), pid, r.Body, closeAfter); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) signalProcess(w http.ResponseWriter, r *http.Request) {
	pid, err := pidOf(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	var req apiv1.SignalRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	sig, err := ParseSignal(req.Signal)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.m.Processes().Signal(r.Context(), r.PathValue("id"), pid, sig); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) resizeProcess(w http.ResponseWriter, r *http.Request) {
	pid, err := pidOf(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	var req apiv1.PTYSize
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.m.Processes().Resize(r.Context(), r.PathValue("id"), pid, req.Cols, req.Rows); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ParseSignal accepts "TERM", "SIGTERM" or "15".
func ParseSignal(v string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 || n > 64 {
			return 0, errdefs.Invalid("signal", "number %d out of range 1..64", n)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, errdefs.Invalid("signal", "unknown signal %q", v)
}
