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
	// TLSFingerprint is the SHA-256 of the node's TLS key
	// ("sha256:hex"), as it registered it: what control planes pin.
	TLSFingerprint string `json:"tls_fingerprint,omitempty"`
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
)

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
