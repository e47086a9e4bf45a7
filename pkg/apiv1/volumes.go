package apiv1

import "time"

// VolumeMount mounts a named volume into a sandbox (the create request's
// and the sandbox's "volumes").
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// CreateVolumeRequest is the body of POST /v1/volumes. SizeGiB 0 takes
// the default (1 GiB).
type CreateVolumeRequest struct {
	Name    string `json:"name"`
	SizeGiB int64  `json:"size_gib,omitempty"`
}

// Volume is what the API reports about one volume.
type Volume struct {
	Name      string    `json:"name"`
	SizeGiB   int64     `json:"size_gib"`
	CreatedAt time.Time `json:"created_at"`
	// MountedBy are the live sandboxes that mount it.
	MountedBy []string `json:"mounted_by"`
	// UsedBytes and SizeBytes are its file system's, absent while a vm
	// sandbox holds it.
	UsedBytes *int64 `json:"used_bytes,omitempty"`
	SizeBytes *int64 `json:"size_bytes,omitempty"`
	// Node is the node that holds it, through a control plane (absent
	// from a single daemon).
	Node string `json:"node,omitempty"`
}

// VolumeList is the body of GET /v1/volumes.
type VolumeList struct {
	Volumes []Volume `json:"volumes"`
}
