package agent

import (
	"net/http"

	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// maxSignal is the highest signal number (SIGRTMAX on Linux).
const maxSignal = 64

// processSignal is POST /v1/process/signal: the signal goes to the whole
// process group.
func (s *Server) processSignal(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.SignalRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Signal < 1 || req.Signal > maxSignal {
		return errdefs.Invalid("signal", "%d is not a signal", req.Signal)
	}
	p, err := s.procs.getRunning(req.PID)
	if err != nil {
		return err
	}
	if err := p.signal(unix.Signal(req.Signal)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
