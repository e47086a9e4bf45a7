package agent

import (
	"net/http"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// processConnect is POST /v1/process/connect: re-attach to a process by pid
// or tag. A process that already ended yields start, its undelivered
// output, and end.
func (s *Server) processConnect(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ConnectRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.PID <= 0 && req.Tag == "" {
		return errdefs.Invalid("pid", "neither pid nor tag given")
	}
	p, err := s.procs.find(req.PID, req.Tag)
	if err != nil {
		return err
	}
	s.streamEvents(w, r, p)
	return nil
}
