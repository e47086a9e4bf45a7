package apiv1

import "time"

// Usage is what a sandbox (or a group of them) used, measured on the host
// from its cgroup and its network link.
type Usage struct {
	// CPUSeconds is the CPU time used; CPUBurstSeconds the part above the
	// CPU request (summed per metering interval).
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUBurstSeconds float64 `json:"cpu_burst_seconds"`
	// MemoryRequestedGiBSeconds is the memory request held over the
	// running time; MemoryUsedGiBSeconds the working set over it.
	MemoryRequestedGiBSeconds float64 `json:"memory_requested_gib_seconds"`
	MemoryUsedGiBSeconds      float64 `json:"memory_used_gib_seconds"`
	// MemoryPeakBytes is the largest working set read; MemoryAvgBytes the
	// time-weighted average (vm: QEMU's own memory included).
	MemoryPeakBytes uint64 `json:"memory_peak_bytes"`
	MemoryAvgBytes  uint64 `json:"memory_avg_bytes"`
	// NetInBytes and NetOutBytes are the bytes the sandbox received and
	// sent on its link (headers included).
	NetInBytes  uint64 `json:"net_in_bytes"`
	NetOutBytes uint64 `json:"net_out_bytes"`
	// DiskPeakBytes is the most its writable layer took on the host's
	// disk; DiskQuotaBytes the layer's size.
	DiskPeakBytes  uint64 `json:"disk_peak_bytes"`
	DiskQuotaBytes uint64 `json:"disk_quota_bytes"`
	// RunningSeconds and PausedSeconds are the wall time by state.
	RunningSeconds float64 `json:"running_seconds"`
	PausedSeconds  float64 `json:"paused_seconds"`
}

// SandboxUsage is the body of GET /v1/sandboxes/{id}/usage: a sandbox's
// usage so far (Live: it has not ended) or settled at its end.
type SandboxUsage struct {
	SandboxID string            `json:"sandbox_id"`
	Runtime   string            `json:"runtime"`
	Tags      map[string]string `json:"tags,omitempty"`
	StartedAt time.Time         `json:"started_at"`
	EndedAt   *time.Time        `json:"ended_at,omitempty"`
	Live      bool              `json:"live"`
	Usage
}

// UsageReport is the body of GET /v1/usage: the usage of the sandboxes
// that ran in [From, To), ended and live, grouped by GroupBy ("" for one
// total, "sandbox", "runtime" or "tag:KEY"). A sandbox counts in full in
// every window its life overlaps.
type UsageReport struct {
	From    time.Time    `json:"from"`
	To      *time.Time   `json:"to,omitempty"`
	GroupBy string       `json:"group_by,omitempty"`
	Groups  []UsageGroup `json:"groups"`
}

// UsageGroup is the usage of the sandboxes with one value of the
// grouping ("" for those without the tag, or the total). MemoryPeakBytes
// and DiskPeakBytes are the group's largest, MemoryAvgBytes its average
// per running sandbox.
type UsageGroup struct {
	Key       string `json:"key"`
	Sandboxes int    `json:"sandboxes"`
	Usage
}
