package api

import (
	"fmt"
	"net/http"

	"corral/internal/errdefs"
	"corral/internal/image/store"
	"corral/pkg/apiv1"
)

// images returns the store, or an error when the daemon has none.
func (s *Server) images() (*store.Store, error) {
	st := s.m.Images()
	if st == nil {
		return nil, fmt.Errorf("%w: this daemon has no image store", errdefs.ErrNotSupported)
	}
	return st, nil
}

func (s *Server) toImage(st *store.Store, img store.Image) apiv1.Image {
	out := apiv1.Image{Digest: string(img.Digest), Tags: img.Tags, Created: img.Created, Env: img.Config.Env,
		Cmd: img.Config.Cmd, Workdir: img.Config.Workdir, User: img.Config.User, InUse: s.m.ImageInUse(img.Digest)}
	for _, d := range img.Layers {
		out.Layers = append(out.Layers, string(d))
		if l, err := st.Layer(d); err == nil {
			out.Size += l.Size
		}
	}
	return out
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	st, err := s.images()
	if err != nil {
		writeError(w, err)
		return
	}
	imgs, err := st.Images()
	if err != nil {
		writeError(w, err)
		return
	}
	out := apiv1.ImageList{Images: []apiv1.Image{}}
	for _, img := range imgs {
		out.Images = append(out.Images, s.toImage(st, img))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getImage(w http.ResponseWriter, r *http.Request) {
	st, err := s.images()
	if err != nil {
		writeError(w, err)
		return
	}
	img, err := st.Resolve(r.PathValue("ref"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toImage(st, img))
}

func (s *Server) deleteImage(w http.ResponseWriter, r *http.Request) {
	st, err := s.images()
	if err != nil {
		writeError(w, err)
		return
	}
	if err := st.RemoveImage(r.PathValue("ref")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pruneImages(w http.ResponseWriter, r *http.Request) {
	st, err := s.images()
	if err != nil {
		writeError(w, err)
		return
	}
	rep, err := st.Prune(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := apiv1.PruneReport{Images: []string{}, Layers: []string{}, Bytes: rep.Bytes}
	for _, d := range rep.Images {
		out.Images = append(out.Images, string(d))
	}
	for _, d := range rep.Layers {
		out.Layers = append(out.Layers, string(d))
	}
	writeJSON(w, http.StatusOK, out)
}
