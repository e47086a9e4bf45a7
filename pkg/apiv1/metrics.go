package apiv1

import "time"

// Metrics is the body of GET /v1/sandboxes/{id}/metrics: a sandbox's
// recent resource samples, oldest first, taken by the daemon every
// Interval seconds while the sandbox runs (none while it is paused; the
// history goes with the sandbox, and is bounded: the daemon keeps the
// newest 120 by default).
type Metrics struct {
	Interval float64        `json:"interval"`
	Samples  []MetricSample `json:"samples"`
}

// MetricSample is one sample of what a sandbox used, measured on the host.
type MetricSample struct {
	Time time.Time `json:"time"`
	// CPUPercent is the CPU used since the previous sample, in percent of
	// one core (200: two cores busy); CPUCount the cores it may use.
	CPUPercent float64 `json:"cpu_percent"`
	CPUCount   float64 `json:"cpu_count"`
	// MemoryUsed is its working set (vm: QEMU's included), MemoryTotal
	// its memory limit; bytes.
	MemoryUsed  uint64 `json:"memory_used"`
	MemoryTotal uint64 `json:"memory_total"`
	// DiskUsed is what its private writable layer takes on the host's
	// disk, DiskTotal the layer's size (disk_mb); bytes.
	DiskUsed  uint64 `json:"disk_used"`
	DiskTotal uint64 `json:"disk_total"`
}
