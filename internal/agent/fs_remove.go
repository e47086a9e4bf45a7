package agent

import (
	"net/http"
	"os"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// fsRemove is POST /v1/fs/remove: the entry itself (a symlink, not its
// target); a directory with contents needs recursive. The root is refused.
func (s *Server) fsRemove(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.RemoveRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	sandbox, host, err := s.hostPath(req.Path, req.User, false)
	if err != nil {
		return err
	}
	if host == s.root {
		return errdefs.Invalid("path", "refusing to remove the root")
	}
	if _, err := os.Lstat(host); err != nil {
		return fsError("remove", sandbox, err)
	}
	if req.Recursive {
		err = os.RemoveAll(host) // never follows symlinks
	} else {
		err = os.Remove(host)
	}
	if err != nil {
		return fsError("remove", sandbox, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
