package api

import (
	"fmt"
	"net/http"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// snapshotFS turns a running sandbox's files into an image.
func (s *Server) snapshotFS(w http.ResponseWriter, r *http.Request) {
	if s.builder == nil {
		s.writeError(w, fmt.Errorf("%w: this daemon does not make images", errdefs.ErrNotSupported))
		return
	}
	var req apiv1.SnapshotFSRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	snap, err := s.builder.SnapshotFS(r.Context(), r.PathValue("id"), req.Tag)
	if err != nil {
		s.writeError(w, err)
		return
	}
	described, err := s.m.Images().Get(string(snap.Image.Digest))
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.SnapshotFSResult{Image: toImage(described), LeftOut: []string{}, LeftOutCount: snap.LeftOutCount}
	for _, n := range snap.LeftOut {
		out.LeftOut = append(out.LeftOut, "/"+strings.TrimPrefix(n, "/"))
	}
	writeJSON(w, http.StatusOK, out)
}

// pauseSandbox saves a running sandbox to disk: whole, or its
// filesystem only (keep_memory false).
func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	var req apiv1.PauseRequest
	if r.ContentLength != 0 { // the body is optional
		if err := decodeJSON(w, r, &req); err != nil {
			s.writeError(w, err)
			return
		}
	}
	o := manager.PauseOptions{Filesystem: req.KeepMemory != nil && !*req.KeepMemory}
	sb, err := s.m.PauseWith(r.Context(), r.PathValue("id"), o)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toAPI(sb))
}

// resumeSandbox brings a paused sandbox back.
func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.m.Resume(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toAPI(sb))
}

// snapshotMemory saves a running sandbox's whole state as a snapshot.
func (s *Server) snapshotMemory(w http.ResponseWriter, r *http.Request) {
	var req apiv1.SnapshotMemoryRequest
	if r.ContentLength != 0 { // the body (a name) is optional
		if err := decodeJSON(w, r, &req); err != nil {
			s.writeError(w, err)
			return
		}
	}
	sn, err := s.m.Snapshots().Take(r.Context(), r.PathValue("id"), req.Name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toAPISnapshot(sn))
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	all, err := s.m.Snapshots().List(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.SnapshotList{Snapshots: []apiv1.Snapshot{}}
	for _, sn := range all {
		out.Snapshots = append(out.Snapshots, toAPISnapshot(sn))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	sn, err := s.m.Snapshots().Get(r.Context(), r.PathValue("ref"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPISnapshot(sn))
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	sn, err := s.m.Snapshots().Remove(r.Context(), r.PathValue("ref"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPISnapshot(sn))
}

// forkSandbox starts copies of a running sandbox.
func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) {
	var req apiv1.ForkRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	copies, err := s.m.Snapshots().Fork(r.Context(), r.PathValue("id"), req.Count)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.ForkResult{Sandboxes: []apiv1.Sandbox{}}
	for _, sb := range copies {
		out.Sandboxes = append(out.Sandboxes, s.toAPI(sb))
	}
	writeJSON(w, http.StatusCreated, out)
}

func toAPISnapshot(sn *sandbox.Snapshot) apiv1.Snapshot {
	image := sn.Spec.Image
	if sn.Spec.ImageDigest != "" {
		image = sn.Spec.ImageDigest
	}
	return apiv1.Snapshot{
		ID: sn.ID, Name: sn.Name, SandboxID: sn.SandboxID, Runtime: sn.Runtime, RuntimeVersion: sn.RuntimeVersion,
		AgentProtocol: sn.AgentProtocol, AgentVersion: sn.AgentVersion, Image: image, CPU: sn.Spec.CPU,
		MemoryMB: sn.Spec.MemoryMB, DiskMB: sn.Spec.DiskMB, SizeBytes: sn.SizeBytes, CreatedAt: sn.CreatedAt,
	}
}
