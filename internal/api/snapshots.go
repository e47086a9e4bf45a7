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
