package agent

import "net/http"

// fsStat is GET /v1/fs/stat?path=P[&user=U]: the entry itself, not a symlink's target.
func (s *Server) fsStat(w http.ResponseWriter, r *http.Request) error {
	sandbox, host, err := s.hostPath(r.URL.Query().Get("path"), r.URL.Query().Get("user"), false)
	if err != nil {
		return err
	}
	info, err := s.entryInfo(host, s.newIDNames())
	if err != nil {
		return fsError("stat", sandbox, err)
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}
