package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"corral/internal/build"
	"corral/internal/errdefs"
	"corral/internal/image/store"
	"corral/pkg/apiv1"
)

// maxBuildBody bounds a build request (a spec with long run scripts).
const maxBuildBody = 8 << 20

// buildImage runs a build and streams its progress as NDJSON. A request
// that fails validation gets a 4xx; once streaming has begun, the outcome
// is the last event (done or error). A client that goes away cancels the
// build; steps already cached stay cached.
func (s *Server) buildImage(w http.ResponseWriter, r *http.Request) {
	if s.builder == nil {
		s.writeError(w, fmt.Errorf("%w: this daemon does not build images", errdefs.ErrNotSupported))
		return
	}
	var req apiv1.BuildRequest
	if err := decodeJSONLimit(w, r, &req, maxBuildBody); err != nil {
		s.writeError(w, err)
		return
	}
	breq := build.Request{Spec: req.Spec, Tag: req.Tag, NoCache: req.NoCache}
	if err := build.Validate(breq); err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	out := &eventWriter{w: w, enc: json.NewEncoder(w)}
	out.flusher, _ = w.(http.Flusher)
	breq.Emit = out.send
	img, err := s.builder.Build(r.Context(), breq)
	if err != nil {
		s.log.InfoContext(r.Context(), "build failed", "op", "build", "tag", req.Tag, "err", err)
		out.send(apiv1.BuildEvent{Type: apiv1.BuildEventError, Error: &apiv1.ErrorDetail{Code: errdefs.Code(err), Message: s.red.String(err.Error())}})
		return
	}
	s.log.InfoContext(r.Context(), "image built", "op", "build", "tag", req.Tag, "image", img.Digest)
	built, err := s.m.Images().Get(string(img.Digest))
	if err != nil {
		out.send(apiv1.BuildEvent{Type: apiv1.BuildEventError, Error: &apiv1.ErrorDetail{Code: errdefs.Code(err), Message: s.red.String(err.Error())}})
		return
	}
	apiImg := toImage(built)
	out.send(apiv1.BuildEvent{Type: apiv1.BuildEventDone, Image: &apiImg})
}

// eventWriter writes build events as NDJSON lines, each flushed. Writes
// after the client went away are dropped (the build sees its context end).
type eventWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	enc     *json.Encoder
	flusher http.Flusher
	broken  bool
}

func (e *eventWriter) send(ev apiv1.BuildEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.broken {
		return
	}
	if err := e.enc.Encode(ev); err != nil {
		e.broken = true
		return
	}
	if e.flusher != nil {
		e.flusher.Flush()
	}
}

// maxLayerBytes bounds an uploaded layer (the store's extraction limits
// apply as well).
const maxLayerBytes = 64 << 30

// uploadLayer adds a layer tar (plain or gzip) to the store: the copy
// steps of a build upload their files this way.
func (s *Server) uploadLayer(w http.ResponseWriter, r *http.Request) {
	l, err := s.m.Images().AddLayer(r.Context(), http.MaxBytesReader(w, r.Body, maxLayerBytes))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.LayerInfo{Digest: string(l.Digest), Size: l.Size})
}

// getLayer reports whether the store holds a layer.
func (s *Server) getLayer(w http.ResponseWriter, r *http.Request) {
	d, err := store.ParseDigest(r.PathValue("digest"))
	if err != nil {
		s.writeError(w, errdefs.Invalid("digest", "%v", err))
		return
	}
	l, err := s.m.Images().Layer(d)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.LayerInfo{Digest: string(l.Digest), Size: l.Size})
}
