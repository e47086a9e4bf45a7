package agent

import (
	"net/http"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/fspath"
)

// fsMkdir is POST /v1/fs/mkdir: like mkdir -p.
func (s *Server) fsMkdir(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.MakeDirRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Mode > 0o7777 {
		return errdefs.Invalid("mode", "%o is not a mode", req.Mode)
	}
	mode := req.Mode
	if mode == 0 {
		mode = defaultDirMode
	}
	sandbox, err := s.absPath(req.Path, "")
	if err != nil {
		return err
	}
	host, err := fspath.MkdirAll(s.root, sandbox, agentapi.FileMode(mode))
	if err != nil {
		return fsError("mkdir", sandbox, err)
	}
	info, err := s.entryInfo(host, s.newIDNames())
	if err != nil {
		return fsError("stat", sandbox, err)
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}
