package agent

import (
	"net/http"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/fspath"
)

// fsMkdir is POST /v1/fs/mkdir: like mkdir -p; the directories it creates
// belong to the request's user.
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
	acct, err := s.lookupUser(req.User)
	if err != nil {
		return err
	}
	sandbox, err := sandboxPath(req.Path, acct.home)
	if err != nil {
		return err
	}
	uid, gid := owner(acct, req.User != "")
	host, err := fspath.MkdirAllAs(s.root, sandbox, agentapi.FileMode(mode), uid, gid)
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
