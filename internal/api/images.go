package api

import (
	"net/http"

	"corral/internal/errdefs"
	"corral/internal/image/oci"
	"corral/internal/manager"
	"corral/pkg/apiv1"
)

func toImage(img manager.Image) apiv1.Image {
	out := apiv1.Image{Digest: string(img.Digest), Tags: img.Tags, Created: img.Created, Env: img.Config.Env,
		Cmd: img.Config.Cmd, Workdir: img.Config.Workdir, User: img.Config.User, InUse: img.InUse, Size: img.Size}
	for _, d := range img.Layers {
		out.Layers = append(out.Layers, string(d))
	}
	return out
}

// writeImage answers with an image, or the error.
func (s *Server) writeImage(w http.ResponseWriter, img manager.Image, err error) {
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toImage(img))
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	imgs, err := s.m.Images().List()
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.ImageList{Images: []apiv1.Image{}}
	for _, img := range imgs {
		out.Images = append(out.Images, toImage(img))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getImage(w http.ResponseWriter, r *http.Request) {
	img, err := s.m.Images().Get(r.PathValue("ref"))
	s.writeImage(w, img, err)
}

func (s *Server) deleteImage(w http.ResponseWriter, r *http.Request) {
	if err := s.m.Images().Remove(r.PathValue("ref")); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pruneImages(w http.ResponseWriter, r *http.Request) {
	rep, err := s.m.Images().Prune(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.PruneReport{Images: []string{}, Layers: []string{}, Bytes: rep.Bytes, Kept: []apiv1.PruneKept{}}
	for _, d := range rep.Images {
		out.Images = append(out.Images, string(d))
	}
	for _, d := range rep.Layers {
		out.Layers = append(out.Layers, string(d))
	}
	for _, k := range rep.Kept {
		pk := apiv1.PruneKept{Kind: k.Kind, Digest: string(k.Digest), Reason: k.Reason, Detail: k.Detail}
		if !k.Until.IsZero() {
			until := k.Until.UTC()
			pk.Until = &until
		}
		out.Kept = append(out.Kept, pk)
	}
	writeJSON(w, http.StatusOK, out)
}

// maxImportBytes bounds an uploaded image archive.
const maxImportBytes = 64 << 30

// importImage imports the uploaded archive (docker save, or a tar of an
// OCI layout), tagged ?ref= if given (a build's base is imported untagged
// and named by its digest).
func (s *Server) importImage(w http.ResponseWriter, r *http.Request) {
	img, err := s.m.Images().Import(r.Context(), r.Body, maxImportBytes, r.URL.Query().Get("ref"))
	s.writeImage(w, img, err)
}

// pullImage fetches an image from a registry.
func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) {
	var req apiv1.PullRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if req.Ref == "" || len(req.Ref) > 512 {
		s.writeError(w, errdefs.Invalid("ref", "required, at most 512 bytes"))
		return
	}
	img, err := s.m.Images().Pull(r.Context(), req.Ref, oci.PullOptions{Insecure: req.Insecure})
	s.writeImage(w, img, err)
}
