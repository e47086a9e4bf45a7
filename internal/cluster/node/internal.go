package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"

	"corral/internal/cluster/nodeauth"
	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// internalPrefix begins the node-internal endpoints (apiv1.Node*): only a
// control plane's request with this node's credential reaches them.
const internalPrefix = "/v1/cluster/node/"

// maxForkCopyBody bounds a fork copy's request (a ref, an id, the tags).
const maxForkCopyBody = 256 << 10

// internal serves the node-internal endpoints; the caller checked the
// credential.
func (n *Node) internal(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, apiv1.NodeSnapshotExport):
		n.exportSnapshot(w, r, strings.TrimPrefix(r.URL.Path, apiv1.NodeSnapshotExport))
	case r.Method == http.MethodPost && r.URL.Path == apiv1.NodeSnapshotImport:
		n.importSnapshot(w, r)
	case r.Method == http.MethodPost && r.URL.Path == apiv1.NodeForkCopy:
		n.forkCopy(w, r)
	case r.Method == http.MethodPost && r.URL.Path == apiv1.NodeMoveIn:
		n.moveIn(w, r) // move.go
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, apiv1.NodeMoveRemove):
		n.moveRemove(w, r, strings.TrimPrefix(r.URL.Path, apiv1.NodeMoveRemove))
	case r.Method == http.MethodPost && r.URL.Path == apiv1.NodeSignedFiles:
		n.signedFiles(w, r) // signed.go
	case strings.HasPrefix(r.URL.Path, nodeauth.ImagesPath):
		n.images.ServeHTTP(w, r) // images.go
	case strings.HasPrefix(r.URL.Path, nodeauth.LayersPath):
		n.layers.ServeHTTP(w, r) // layers.go
	default:
		writeError(w, fmt.Errorf("%w: no node-internal route for %s %s", errdefs.ErrNotFound, r.Method, r.URL.Path))
	}
}

// exportSnapshot streams snapshot ref (apiv1.NodeSnapshotExport). An
// error after the first byte cuts the stream short, which the importing
// node refuses.
func (n *Node) exportSnapshot(w http.ResponseWriter, r *http.Request, ref string) {
	if _, err := n.m.Snapshots().Get(r.Context(), ref); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	if err := n.m.Snapshots().Export(r.Context(), ref, w); err != nil {
		n.cfg.Log.Warn("exporting a snapshot to the cluster", "op", "cluster", "snapshot", ref, "err", err)
		panic(http.ErrAbortHandler) // the importer must not see a clean end
	}
}

// importSnapshot keeps the snapshot streamed in the body
// (apiv1.NodeSnapshotImport).
func (n *Node) importSnapshot(w http.ResponseWriter, r *http.Request) {
	rec, err := n.m.Snapshots().Import(r.Context(), r.Body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiv1.Snapshot{ID: rec.ID, Name: rec.Name, SandboxID: rec.SandboxID, Runtime: rec.Runtime,
		RuntimeVersion: rec.RuntimeVersion, AgentProtocol: rec.AgentProtocol, AgentVersion: rec.AgentVersion,
		CPU: rec.Spec.CPU, MemoryMB: rec.Spec.MemoryMB, DiskMB: rec.Spec.DiskMB, SizeBytes: rec.SizeBytes, CreatedAt: rec.CreatedAt})
}

// forkCopy starts one copy of a fork from a snapshot this node holds,
// tagged with the sandbox it was forked from (apiv1.NodeForkCopy): the
// public create refuses that tag, which is the daemon's own.
func (n *Node) forkCopy(w http.ResponseWriter, r *http.Request) {
	var req apiv1.ForkCopyRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxForkCopyBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, errdefs.Invalid("body", "%v", err))
		return
	}
	if !sandbox.ValidSnapshotRef(req.Snapshot) {
		writeError(w, errdefs.Invalid("snapshot", "%q is neither a snapshot id nor a snapshot name", req.Snapshot))
		return
	}
	if req.ForkedFrom == "" || len(req.ForkedFrom) > 64 {
		writeError(w, errdefs.Invalid("forked_from", "want the id of the forked sandbox"))
		return
	}
	tags := maps.Clone(req.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[manager.ForkedFromTag] = req.ForkedFrom
	sb, err := n.m.Create(r.Context(), sandbox.Spec{FromSnapshot: req.Snapshot, Tags: tags})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiv1.ForkCopy{ID: sb.ID})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = errdefs.Invalid("body", "larger than %d bytes", mbe.Limit)
	}
	writeJSON(w, errdefs.HTTPStatus(err), errdefs.ToWire(err))
}
