package api

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"corral/internal/errdefs"
	"corral/internal/image/oci"
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
	out := apiv1.PruneReport{Images: []string{}, Layers: []string{}, Bytes: rep.Bytes + s.m.PruneRuntimeCaches()}
	for _, d := range rep.Images {
		out.Images = append(out.Images, string(d))
	}
	for _, d := range rep.Layers {
		out.Layers = append(out.Layers, string(d))
	}
	writeJSON(w, http.StatusOK, out)
}

// maxImportBytes bounds an uploaded image archive.
const maxImportBytes = 64 << 30

// importImage stores the uploaded archive (docker save, or a tar of an OCI
// layout) in a temporary file and imports it under ?ref=.
func (s *Server) importImage(w http.ResponseWriter, r *http.Request) {
	st, err := s.images()
	if err != nil {
		writeError(w, err)
		return
	}
	// ref is optional: an untagged import (a build's base) is named by
	// its digest.
	ref := r.URL.Query().Get("ref")
	if _, err := store.ParseRef(ref); ref != "" && err != nil {
		writeError(w, errdefs.Invalid("ref", "%v", err))
		return
	}
	tmp, err := os.CreateTemp(filepath.Join(st.Root(), "tmp"), "import-*.tar")
	if err != nil {
		writeError(w, err)
		return
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, http.MaxBytesReader(w, r.Body, maxImportBytes))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		writeError(w, errdefs.Invalid("body", "reading the archive: %v", err))
		return
	}
	img, err := oci.Import(r.Context(), st, tmp.Name(), ref)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toImage(st, img))
}

// pullImage fetches an image from a registry.
func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) {
	st, err := s.images()
	if err != nil {
		writeError(w, err)
		return
	}
	var req apiv1.PullRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Ref == "" || len(req.Ref) > 512 {
		writeError(w, errdefs.Invalid("ref", "required, at most 512 bytes"))
		return
	}
	img, err := oci.Pull(r.Context(), st, req.Ref, oci.PullOptions{Insecure: req.Insecure})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toImage(st, img))
}
