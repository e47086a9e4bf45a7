package agent

import (
	"net/http"
	"time"

	"corral/internal/agentapi"
)

// health is GET /v1/health.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, agentapi.HealthInfo{OK: true, UptimeMS: time.Since(s.started).Milliseconds()})
	return nil
}
