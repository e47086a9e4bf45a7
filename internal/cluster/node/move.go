package node

import (
	"encoding/json"
	"io"
	"net/http"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// maxMoveInBody bounds a move's request (an id, a ref, a name).
const maxMoveInBody = 16 << 10

// moveIn takes a sandbox a drain moves here (apiv1.NodeMoveIn): started
// from the snapshot this node holds under the sandbox's own id, then
// paused.
func (n *Node) moveIn(w http.ResponseWriter, r *http.Request) {
	var req apiv1.MoveInRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxMoveInBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, errdefs.Invalid("body", "%v", err))
		return
	}
	if !sandbox.ValidSnapshotRef(req.Snapshot) {
		writeError(w, errdefs.Invalid("snapshot", "%q is neither a snapshot id nor a snapshot name", req.Snapshot))
		return
	}
	if req.Name != "" && !sandbox.ValidName(req.Name) {
		writeError(w, errdefs.Invalid("name", "%q is not a sandbox name", req.Name))
		return
	}
	sb, err := n.m.MoveIn(r.Context(), req.ID, req.Snapshot, req.Name)
	if err != nil {
		writeError(w, err)
		return
	}
	n.cfg.Log.Info("sandbox moved here by a drain", "op", "cluster", "sandbox", sb.ID, "snapshot", req.Snapshot)
	writeJSON(w, http.StatusCreated, apiv1.MovedIn{ID: sb.ID, State: string(sb.State)})
}

// moveRemove terminates and forgets a sandbox that now lives on another
// node (apiv1.NodeMoveRemove), or whose move here was undone.
func (n *Node) moveRemove(w http.ResponseWriter, r *http.Request, id string) {
	if err := n.m.RemoveMoved(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	n.cfg.Log.Info("sandbox removed: it moved to another node", "op", "cluster", "sandbox", id)
	w.WriteHeader(http.StatusNoContent)
}
