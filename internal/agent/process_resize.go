package agent

import (
	"fmt"
	"net/http"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// processResize is POST /v1/process/resize: a PTY process's terminal size.
func (s *Server) processResize(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ResizeRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Cols == 0 || req.Rows == 0 {
		return errdefs.Invalid("size", "zero columns or rows")
	}
	p, err := s.procs.getRunning(req.PID)
	if err != nil {
		return err
	}
	if p.ptmx == nil {
		return fmt.Errorf("%w: process %d has no terminal", errdefs.ErrFailedPrecondition, req.PID)
	}
	if err := setWinsize(p.ptmx, agentapi.PTYSize{Cols: req.Cols, Rows: req.Rows}); err != nil {
		return fmt.Errorf("%w: resizing terminal of process %d: %v", errdefs.ErrFailedPrecondition, req.PID, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
