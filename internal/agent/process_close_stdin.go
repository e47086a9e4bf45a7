package agent

import (
	"net/http"

	"corral/internal/agentapi"
)

// processCloseStdin is POST /v1/process/close-stdin: the process reads EOF
// (for a terminal: ^D is sent).
func (s *Server) processCloseStdin(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.PIDRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	p, err := s.procs.getRunning(req.PID)
	if err != nil {
		return err
	}
	if err := closeInput(p); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
