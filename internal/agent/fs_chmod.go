package agent

import (
	"net/http"
	"os"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// fsChmod is POST /v1/fs/chmod: the mode of the entry (a symlink's target,
// resolved inside the root, as chmod(1) does).
func (s *Server) fsChmod(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ChmodRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Mode > 0o7777 {
		return errdefs.Invalid("mode", "%o is not a mode", req.Mode)
	}
	sandbox, host, err := s.hostPath(req.Path, req.User, true)
	if err != nil {
		return err
	}
	if err := os.Chmod(host, agentapi.FileMode(req.Mode)); err != nil {
		return fsError("chmod", sandbox, err)
	}
	info, err := s.entryInfo(host, s.newIDNames())
	if err != nil {
		return fsError("stat", sandbox, err)
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}
