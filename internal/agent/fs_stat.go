package agent

import (
	"net/http"

	"corral/internal/agentapi"
)

// fsStat is GET /v1/fs/stat?path=P[&user=U][&xattrs=PREFIX]: the entry
// itself, not a symlink's target; with xattrs (protocol 4) its extended
// attributes under that prefix.
func (s *Server) fsStat(w http.ResponseWriter, r *http.Request) error {
	prefix, err := xattrPrefix(r.URL.Query().Get(agentapi.QueryXattrs))
	if err != nil {
		return err
	}
	sandbox, host, err := s.hostPath(r.URL.Query().Get("path"), r.URL.Query().Get("user"), false)
	if err != nil {
		return err
	}
	info, err := s.entryInfo(host, s.newIDNames())
	if err != nil {
		return fsError("stat", sandbox, err)
	}
	writeJSON(w, http.StatusOK, withXattrs(info, host, prefix))
	return nil
}
