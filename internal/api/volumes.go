package api

import (
	"io"
	"net/http"
	"strconv"

	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/sandbox"
	"corral/internal/volume"
	"corral/pkg/apiv1"
)

func volumesOf(in []apiv1.VolumeMount) []sandbox.VolumeMount {
	var out []sandbox.VolumeMount
	for _, v := range in {
		out = append(out, sandbox.VolumeMount{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	return out
}

func volumesToAPI(in []sandbox.VolumeMount) []apiv1.VolumeMount {
	var out []apiv1.VolumeMount
	for _, v := range in {
		out = append(out, apiv1.VolumeMount{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	return out
}

func volumeToAPI(v manager.VolumeInfo) apiv1.Volume {
	out := apiv1.Volume{Name: v.Name, SizeGiB: v.SizeGiB, CreatedAt: v.CreatedAt, MountedBy: v.MountedBy}
	if out.MountedBy == nil {
		out.MountedBy = []string{}
	}
	if v.Usage {
		used, size := v.UsedBytes, v.SizeBytes
		out.UsedBytes, out.SizeBytes = &used, &size
	}
	return out
}

// volumeName is the {name} of a volume route, checked before any use.
func volumeName(r *http.Request) (string, error) {
	n := r.PathValue("name")
	return n, volume.CheckName("name", n)
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) {
	var req apiv1.CreateVolumeRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	v, err := s.m.CreateVolume(r.Context(), req.Name, req.SizeGiB)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, volumeToAPI(v))
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	vols, err := s.m.ListVolumes(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.VolumeList{Volumes: []apiv1.Volume{}}
	for _, v := range vols {
		out.Volumes = append(out.Volumes, volumeToAPI(v))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) {
	name, err := volumeName(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	v, err := s.m.GetVolume(r.Context(), name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, volumeToAPI(v))
}

// deleteVolume is DELETE /v1/volumes/{name}[?force=true]: refused while
// live sandboxes mount it; force terminates them first.
func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) {
	name, err := volumeName(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	force, err := boolParam(r, "force")
	if err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.m.RemoveVolume(r.Context(), name, force); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func boolParam(r *http.Request, key string) (bool, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errdefs.Invalid(key, "want true or false, got %q", v)
	}
	return b, nil
}

func (s *Server) readVolumeFile(w http.ResponseWriter, r *http.Request) {
	name, err := volumeName(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	path, err := pathParam(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	f, fi, err := s.m.OpenVolumeFile(r.Context(), name, path)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.CopyBuffer(w, io.LimitReader(f, fi.Size()), make([]byte, 256<<10))
}

func (s *Server) writeVolumeFile(w http.ResponseWriter, r *http.Request) {
	name, err := volumeName(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	path, err := pathParam(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	mode, err := modeParam(r.URL.Query().Get("mode"), 0o644)
	if err != nil {
		s.writeError(w, err)
		return
	}
	e, err := s.m.WriteVolumeFile(r.Context(), name, path, r.Body, mode)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, volumeEntry(e))
}

func (s *Server) listVolumeDir(w http.ResponseWriter, r *http.Request) {
	name, err := volumeName(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	path := r.URL.Query().Get("path")
	if path == "" {
		path = "/"
	}
	ents, err := s.m.ListVolumeDir(r.Context(), name, path)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.EntryList{Entries: []apiv1.Entry{}}
	for _, e := range ents {
		out.Entries = append(out.Entries, volumeEntry(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func volumeEntry(e volume.Entry) apiv1.Entry {
	return apiv1.Entry{Name: e.Name, Path: e.Path, Type: e.Type, Size: e.Size, Mode: uint32(e.Mode),
		Permissions: e.Mode.String(), ModifiedAt: e.ModifiedAt, SymlinkTarget: e.Target}
}
