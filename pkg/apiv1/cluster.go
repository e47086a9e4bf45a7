package apiv1

// ClusterNode is one node of a cluster, in GET /v1/cluster/nodes (served
// by a control plane, `corral serve --control`).
type ClusterNode struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	State   string `json:"state"` // ready or lost
	// Draining: no new sandboxes are placed there (POST
	// /v1/cluster/nodes/{id}/drain; undrain resumes).
	Draining bool     `json:"draining,omitempty"`
	Runtimes []string `json:"runtimes"`
	// RuntimeVersions names the version of each runtime that takes
	// memory snapshots: a snapshot restores only on a node of its
	// runtime's version.
	RuntimeVersions map[string]string `json:"runtime_versions,omitempty"`
	KVM             bool              `json:"kvm"`
	Labels          map[string]string `json:"labels"`
	// Capacity: what the node admits.
	CPU          float64 `json:"cpu"`
	MemoryMB     int64   `json:"memory_mb"`
	DiskMB       int64   `json:"disk_mb"`
	MaxSandboxes int     `json:"max_sandboxes"`
	// Placed sums the requests of the sandboxes placed there (reserved,
	// running or being removed).
	PlacedCPU      float64 `json:"placed_cpu"`
	PlacedMemoryMB int64   `json:"placed_memory_mb"`
	PlacedDiskMB   int64   `json:"placed_disk_mb"`
	Sandboxes      int     `json:"sandboxes"`
	Heartbeat      string  `json:"heartbeat"` // RFC 3339, UTC
	LostAt         string  `json:"lost_at,omitempty"`
	// Drain is the progress of a draining node's moves.
	Drain *DrainProgress `json:"drain,omitempty"`
}

// ClusterNodes is the body of GET /v1/cluster/nodes.
type ClusterNodes struct {
	Nodes []ClusterNode `json:"nodes"`
}

// The node-internal endpoints a control plane calls on a node, with the
// node's credential only (never the API token); docs/CLUSTER.md
// describes them. A snapshot travels as one tar stream: its record, then
// its files.
const (
	// NodeSnapshotExport is GET NodeSnapshotExport + "{ref}": the stream.
	NodeSnapshotExport = "/v1/cluster/node/snapshots/export/"
	// NodeSnapshotImport is POST with the stream as body: 201 and the
	// kept Snapshot.
	NodeSnapshotImport = "/v1/cluster/node/snapshots/import"
	// NodeForkCopy is POST with a ForkCopyRequest: 201 and the copy's
	// ForkCopy.
	NodeForkCopy = "/v1/cluster/node/forks"
	// NodeSignedFiles is POST with a SignedFilesRequest: 200 and the
	// SignedFilesMatch of the node's sandbox whose envd access token
	// signed it, or 404.
	NodeSignedFiles = "/v1/cluster/node/e2b/signed"
)

// SignedFilesRequest is a signed envd /files request that names no
// sandbox: its method and its query (path, username, signature,
// signature_expiration), as the caller sent them.
type SignedFilesRequest struct {
	Method string `json:"method"`
	Query  string `json:"query"`
}

// SignedFilesMatch names the sandbox that signed a /files request.
type SignedFilesMatch struct {
	SandboxID string `json:"sandbox_id"`
}

// ForkCopyRequest asks a node for one copy of a fork from a snapshot it
// holds.
type ForkCopyRequest struct {
	Snapshot   string            `json:"snapshot"`
	ForkedFrom string            `json:"forked_from"`
	Tags       map[string]string `json:"tags,omitempty"`
}

// ForkCopy is the copy a node started.
type ForkCopy struct {
	ID string `json:"id"`
}

// The node-internal endpoints of a drain's moves (docs/CLUSTER.md).
const (
	// NodeMoveIn is POST with a MoveInRequest: the node starts the
	// sandbox from the snapshot under its id, paused; 201 and a MovedIn.
	NodeMoveIn = "/v1/cluster/node/moves"
	// NodeMoveRemove is POST NodeMoveRemove + "{id}": the node terminates
	// the sandbox and forgets it (it lives on another node); 204.
	NodeMoveRemove = "/v1/cluster/node/moves/remove/"
)

// MoveInRequest asks a node to take a sandbox moved from another node.
type MoveInRequest struct {
	ID       string `json:"id"`
	Snapshot string `json:"snapshot"`
	Name     string `json:"name,omitempty"`
}

// MovedIn is the sandbox a node took.
type MovedIn struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// DrainProgress is a draining node's moves of its paused sandboxes
// (docs/CLUSTER.md).
type DrainProgress struct {
	// Scanned: the cluster has looked at the node since the drain began,
	// so the counts below are all there is so far.
	Scanned bool `json:"scanned"`
	// ToMove counts the paused sandboxes waiting to move or moving.
	ToMove int `json:"to_move"`
	// Done: scanned and nothing left to move.
	Done     bool           `json:"done"`
	Moved    []DrainSandbox `json:"moved"`
	NotMoved []DrainSandbox `json:"not_moved"`
}

// DrainSandbox is one sandbox of a drain: where it went (Node), or why
// it stays (Reason).
type DrainSandbox struct {
	ID     string `json:"id"`
	Node   string `json:"node,omitempty"`
	Reason string `json:"reason,omitempty"`
}
