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

// withAgent runs f with the sandbox's agent, holding its activity.
func (s *Server) withAgent(w http.ResponseWriter, r *http.Request, f func(c *agentapi.Client) error) {
	c, release, err := s.m.Agent(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	if err := f(c); err != nil {
		writeError(w, err)
	}
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	path, err := pathParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	s.withAgent(w, r, func(c *agentapi.Client) error {
		body, size, err := c.ReadFile(r.Context(), path, r.URL.Query().Get("user"))
		if err != nil {
			return err
		}
		defer body.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
		_, _ = io.CopyBuffer(w, body, make([]byte, 256<<10))
		return nil
	})
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	path, err := pathParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	mode, err := modeParam(r.URL.Query().Get("mode"), 0o644)
	if err != nil {
		writeError(w, err)
		return
	}
	s.withAgent(w, r, func(c *agentapi.Client) error {
		e, err := c.WriteFile(r.Context(), path, r.Body, mode, r.URL.Query().Get("user"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toEntry(e))
		return nil
	})
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request) {
	path, err := pathParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	s.withAgent(w, r, func(c *agentapi.Client) error {
		e, err := c.Stat(r.Context(), path)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toEntry(e))
		return nil
	})
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request) {
	path, err := pathParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	depth := 1
	if d := r.URL.Query().Get("depth"); d != "" {
		if depth, err = strconv.Atoi(d); err != nil || depth < 1 || depth > 16 {
			writeError(w, errdefs.Invalid("depth", "must be 1..16, got %q", d))
			return
		}
	}
	s.withAgent(w, r, func(c *agentapi.Client) error {
		es, err := c.ListDir(r.Context(), path, depth)
		if err != nil {
			return err
		}
		out := apiv1.EntryList{Entries: []apiv1.Entry{}}
		for _, e := range es {
			out.Entries = append(out.Entries, toEntry(e))
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

func (s *Server) pathBody(w http.ResponseWriter, r *http.Request) (apiv1.PathRequest, bool) {
	var req apiv1.PathRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, err)
		return req, false
	}
	if req.Path == "" || len(req.Path) > maxPath {
		writeError(w, errdefs.Invalid("path", "required, at most %d bytes", maxPath))
		return req, false
	}
	if req.Mode > 0o7777 {
		writeError(w, errdefs.Invalid("mode", "must be at most 07777, got %o", req.Mode))
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
	s.withAgent(w, r, func(c *agentapi.Client) error {
		e, err := c.MakeDir(r.Context(), req.Path, mode)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toEntry(e))
		return nil
	})
}

func (s *Server) removePath(w http.ResponseWriter, r *http.Request) {
	req, ok := s.pathBody(w, r)
	if !ok {
		return
	}
	s.withAgent(w, r, func(c *agentapi.Client) error {
		if err := c.Remove(r.Context(), req.Path, req.Recursive); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

func (s *Server) chmodPath(w http.ResponseWriter, r *http.Request) {
	req, ok := s.pathBody(w, r)
	if !ok {
		return
	}
	s.withAgent(w, r, func(c *agentapi.Client) error {
		e, err := c.Chmod(r.Context(), req.Path, os.FileMode(req.Mode))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toEntry(e))
		return nil
	})
}

func (s *Server) renamePath(w http.ResponseWriter, r *http.Request) {
	var req apiv1.RenameRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.From == "" || req.To == "" || len(req.From) > maxPath || len(req.To) > maxPath {
		writeError(w, errdefs.Invalid("from/to", "both required, at most %d bytes", maxPath))
		return
	}
	s.withAgent(w, r, func(c *agentapi.Client) error {
		e, err := c.Rename(r.Context(), req.From, req.To)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toEntry(e))
		return nil
	})
}
