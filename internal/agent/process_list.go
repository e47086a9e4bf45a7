package agent

import (
	"net/http"

	"corral/internal/agentapi"
)

// processList is GET /v1/process/list: the processes still running.
func (s *Server) processList(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, agentapi.ProcessList{Processes: s.procs.list()})
	return nil
}
