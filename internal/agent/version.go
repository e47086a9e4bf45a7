package agent

import (
	"net/http"

	"corral/internal/agentapi"
)

// version is GET /version, the one unversioned path, frozen forever.
func (s *Server) version(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, agentapi.VersionInfo{
		Protocols: s.protocols,
		Agent:     agentapi.AgentVersion,
	})
	return nil
}
