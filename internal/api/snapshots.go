package api

import (
	"fmt"
	"net/http"

	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// snapshotFS turns a running sandbox's files into an image.
func (s *Server) snapshotFS(w http.ResponseWriter, r *http.Request) {
	st, err := s.images()
	if err != nil {
		writeError(w, err)
		return
	}
	if s.builder == nil {
		writeError(w, fmt.Errorf("%w: this daemon does not make images", errdefs.ErrNotSupported))
		return
	}
	var req apiv1.SnapshotFSRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	img, err := s.builder.SnapshotFS(r.Context(), r.PathValue("id"), req.Tag)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toImage(st, img))
}

// pauseSandbox saves a running sandbox to disk.
func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.m.Pause(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPI(sb))
}

// resumeSandbox brings a paused sandbox back.
func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.m.Resume(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPI(sb))
}
