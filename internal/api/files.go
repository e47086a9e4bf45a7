package api

import (
	"io"
	"net/http"
	"os"
	"strconv"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// maxPath bounds a path parameter.
const maxPath = 4096

func pathParam(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", errdefs.Invalid("path", "required")
	}
	if len(p) > maxPath {
		return "", errdefs.Invalid("path", "longer than %d bytes", maxPath)
	}
	return p, nil
}

func modeParam(v string, def os.FileMode) (os.FileMode, error) {
	if v == "" {
		return def, nil
	}
	m, err := strconv.ParseUint(v, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, errdefs.Invalid("mode", "must be octal permissions like 0644, got %q", v)
	}
	return os.FileMode(m), nil
}

func toEntry(e agentapi.EntryInfo) apiv1.Entry {
	return apiv1.Entry{Name: e.Name, Path: e.Path, Type: e.Type, Size: e.Size, Mode: e.Mode, Permissions: e.Permissions,
		Owner: e.Owner, Group: e.Group, ModifiedAt: e.ModifiedAt, SymlinkTarget: e.SymlinkTarget}
}

// userParam is the ?user= of a file call ("" is the sandbox's default
// user), bounded like an exec's.
func userParam(r *http.Request) (string, error) {
	u := r.URL.Query().Get("user")
	if len(u) > 64 {
		return "", errdefs.Invalid("user", "longer than 64 bytes")
	}
	return u, nil
}

// pathAndUser reads ?path= and ?user=.
func pathAndUser(r *http.Request) (string, string, error) {
	path, err := pathParam(r)
	if err != nil {
		return "", "", err
	}
	user, err := userParam(r)
	return path, user, err
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	path, user, err := pathAndUser(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	body, size, err := s.m.Files().Read(r.Context(), r.PathValue("id"), path, user)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.CopyBuffer(w, body, make([]byte, 256<<10))
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	path, user, err := pathAndUser(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	mode, err := modeParam(r.URL.Query().Get("mode"), 0o644)
	if err != nil {
		s.writeError(w, err)
		return
	}
	e, err := s.m.Files().Write(r.Context(), r.PathValue("id"), path, r.Body, mode, user)
	s.writeEntry(w, e, err)
}

// writeEntry answers with an entry, or the error.
func (s *Server) writeEntry(w http.ResponseWriter, e agentapi.EntryInfo, err error) {
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toEntry(e))
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request) {
	path, user, err := pathAndUser(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	e, err := s.m.Files().Stat(r.Context(), r.PathValue("id"), path, user)
	s.writeEntry(w, e, err)
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request) {
	path, user, err := pathAndUser(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	depth := 1
	if d := r.URL.Query().Get("depth"); d != "" {
		if depth, err = strconv.Atoi(d); err != nil || depth < 1 || depth > 16 {
			s.writeError(w, errdefs.Invalid("depth", "must be 1..16, got %q", d))
			return
		}
	}
	es, err := s.m.Files().List(r.Context(), r.PathValue("id"), path, depth, user)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.EntryList{Entries: []apiv1.Entry{}}
	for _, e := range es {
		out.Entries = append(out.Entries, toEntry(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) pathBody(w http.ResponseWriter, r *http.Request) (apiv1.PathRequest, bool) {
	var req apiv1.PathRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return req, false
	}
	if req.Path == "" || len(req.Path) > maxPath {
		s.writeError(w, errdefs.Invalid("path", "required, at most %d bytes", maxPath))
		return req, false
	}
	if req.Mode > 0o7777 {
		s.writeError(w, errdefs.Invalid("mode", "must be at most 07777, got %o", req.Mode))
		return req, false
	}
	if len(req.User) > 64 {
		s.writeError(w, errdefs.Invalid("user", "longer than 64 bytes"))
		return req, false
	}
	return req, true
}

func (s *Server) makeDir(w http.ResponseWriter, r *http.Request) {
	req, ok := s.pathBody(w, r)
	if !ok {
		return
	}
	mode := os.FileMode(req.Mode)
	if mode == 0 {
		mode = 0o755
	}
	e, err := s.m.Files().MakeDir(r.Context(), r.PathValue("id"), req.Path, mode, req.User)
	s.writeEntry(w, e, err)
}

func (s *Server) removePath(w http.ResponseWriter, r *http.Request) {
	req, ok := s.pathBody(w, r)
	if !ok {
		return
	}
	if err := s.m.Files().Remove(r.Context(), r.PathValue("id"), req.Path, req.Recursive, req.User); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) chmodPath(w http.ResponseWriter, r *http.Request) {
	req, ok := s.pathBody(w, r)
	if !ok {
		return
	}
	e, err := s.m.Files().Chmod(r.Context(), r.PathValue("id"), req.Path, os.FileMode(req.Mode), req.User)
	s.writeEntry(w, e, err)
}

func (s *Server) renamePath(w http.ResponseWriter, r *http.Request) {
	var req apiv1.RenameRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if req.From == "" || req.To == "" || len(req.From) > maxPath || len(req.To) > maxPath {
		s.writeError(w, errdefs.Invalid("from/to", "both required, at most %d bytes", maxPath))
		return
	}
	if len(req.User) > 64 {
		s.writeError(w, errdefs.Invalid("user", "longer than 64 bytes"))
		return
	}
	e, err := s.m.Files().Rename(r.Context(), r.PathValue("id"), req.From, req.To, req.User)
	s.writeEntry(w, e, err)
}
