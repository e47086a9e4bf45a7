package agent

import (
	"net/http"
	"os"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// fsRename is POST /v1/fs/rename: rename(2) of the entries themselves (a
// final symlink is moved, not followed).
func (s *Server) fsRename(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.RenameRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	from, fromHost, err := s.hostPath(req.From, req.User, false)
	if err != nil {
		return err
	}
	to, toHost, err := s.hostPath(req.To, req.User, false)
	if err != nil {
		return err
	}
	if fromHost == s.root || toHost == s.root {
		return errdefs.Invalid("path", "refusing to rename the root")
	}
	if err := os.Rename(fromHost, toHost); err != nil {
		return fsError("rename "+from+" to", to, err)
	}
	info, err := s.entryInfo(toHost, s.newIDNames())
	if err != nil {
		return fsError("stat", to, err)
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}
