package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// watchFiles is GET /v1/sandboxes/{id}/files/watch?path=&recursive=&user=:
// the changes in a directory as NDJSON, flushed as they come, until the
// directory or the sandbox goes (an end event says which) or the caller
// closes the stream.
func (s *Server) watchFiles(w http.ResponseWriter, r *http.Request) {
	path, user, err := pathAndUser(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	recursive := false
	switch v := r.URL.Query().Get("recursive"); v {
	case "", "false", "0":
	case "true", "1":
		recursive = true
	default:
		s.writeError(w, errdefs.Invalid("recursive", "true or false, got %q", v))
		return
	}
	ws, err := s.m.Files().Watch(r.Context(), r.PathValue("id"), path, recursive, user)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer ws.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	ev := agentapi.WatchEvent{Type: agentapi.WatchStart, Path: ws.Path, Dir: true}
	for {
		out := apiv1.WatchEvent{Type: ev.Type, Path: ev.Path, Name: ev.Name, Dir: ev.Dir, Dropped: ev.Dropped, Error: ev.Error}
		if err := enc.Encode(out); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		if ev.Type == agentapi.WatchEnd {
			return
		}
		if ev, err = ws.Recv(); err != nil {
			if !errors.Is(err, io.EOF) && r.Context().Err() == nil {
				_ = enc.Encode(apiv1.WatchEvent{Type: apiv1.WatchEnd,
					Error: "the sandbox's agent went away (the sandbox ended or was paused): " + s.red.String(err.Error())})
			}
			return
		}
	}
}
