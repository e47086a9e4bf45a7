// Package usage meters what a sandbox used over its life, for billing
// and quotas: CPU-seconds (and the burst above the request), memory
// GiB-seconds requested and used, peak and average memory, network bytes
// in and out, disk used against the quota, and wall time by state. An
// Account turns a sandbox's host counters, read now and then while it
// runs and once more at its end, into those Totals; Group adds Totals up
// by tag, runtime or sandbox.
//
// Counters are the host's (cgroup CPU time, veth byte counts): the guest
// can neither see nor fake them. A counter that goes backwards (a runtime
// that recreated the sandbox's cgroup or link: a gVisor resume) counts
// again from zero.
//
// It imports nothing from Corral.
package usage

import (
	"math"
	"time"
)

// gib is one GiB in bytes.
const gib = 1 << 30

// Reading is one look at a running sandbox's host counters and levels.
type Reading struct {
	Time time.Time
	// CPUNanos is the CPU time used so far (cumulative).
	CPUNanos uint64
	// MemoryBytes is the working set now; DiskBytes what the writable
	// layer takes on the host's disk now.
	MemoryBytes, DiskBytes uint64
	// NetInBytes and NetOutBytes are the bytes the sandbox's link carried
	// to and from it so far (cumulative).
	NetInBytes, NetOutBytes uint64
}

// Request is what a sandbox asked for, which Totals charge against.
type Request struct {
	// CPU is the cores requested (the share guaranteed; use above it is
	// the burst).
	CPU float64
	// MemoryBytes is the memory requested; DiskQuotaBytes the writable
	// layer's size.
	MemoryBytes, DiskQuotaBytes uint64
}

// Totals is what a sandbox used.
type Totals struct {
	// CPUSeconds is the CPU time used; CPUBurstSeconds the part of it
	// above the request (summed per reading interval).
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUBurstSeconds float64 `json:"cpu_burst_seconds"`
	// MemoryRequestedGiBSeconds is the request held over the running time;
	// MemoryUsedGiBSeconds the working set over it (each reading's level
	// held until the next).
	MemoryRequestedGiBSeconds float64 `json:"memory_requested_gib_seconds"`
	MemoryUsedGiBSeconds      float64 `json:"memory_used_gib_seconds"`
	// MemoryPeakBytes is the largest working set read; MemoryAvgBytes the
	// time-weighted average.
	MemoryPeakBytes uint64 `json:"memory_peak_bytes"`
	MemoryAvgBytes  uint64 `json:"memory_avg_bytes"`
	// NetInBytes and NetOutBytes are the bytes the sandbox received and
	// sent (on its link, headers included).
	NetInBytes  uint64 `json:"net_in_bytes"`
	NetOutBytes uint64 `json:"net_out_bytes"`
	// DiskPeakBytes is the most its writable layer took; DiskQuotaBytes
	// the layer's size.
	DiskPeakBytes  uint64 `json:"disk_peak_bytes"`
	DiskQuotaBytes uint64 `json:"disk_quota_bytes"`
	// RunningSeconds and PausedSeconds are the wall time by state.
	RunningSeconds float64 `json:"running_seconds"`
	PausedSeconds  float64 `json:"paused_seconds"`
}

// Account accumulates one sandbox's Totals from its readings. It is not
// safe for concurrent use.
type Account struct {
	req  Request
	t    Totals
	last Reading
	// meteredSecs is the time the readings cover (for the average).
	meteredSecs float64
}

// NewAccount starts an account for a sandbox that asked for req and
// started at start (its counters are zero then).
func NewAccount(req Request, start time.Time) *Account {
	return &Account{req: req, t: Totals{DiskQuotaBytes: req.DiskQuotaBytes}, last: Reading{Time: start}}
}

// Observe adds reading r: the CPU and bytes used since the previous one
// (or the start), and its levels, held back to the previous reading. A
// reading older than the previous one is ignored.
func (a *Account) Observe(r Reading) {
	if r.Time.Before(a.last.Time) {
		return
	}
	prev := a.last
	dt := r.Time.Sub(prev.Time).Seconds()
	cpu := float64(delta(prev.CPUNanos, r.CPUNanos)) / 1e9
	a.t.CPUSeconds += cpu
	a.t.CPUBurstSeconds += math.Max(0, cpu-a.req.CPU*dt)
	a.t.NetInBytes += delta(prev.NetInBytes, r.NetInBytes)
	a.t.NetOutBytes += delta(prev.NetOutBytes, r.NetOutBytes)
	a.t.MemoryUsedGiBSeconds += float64(r.MemoryBytes) / gib * dt
	a.meteredSecs += dt
	if a.meteredSecs > 0 {
		a.t.MemoryAvgBytes = uint64(a.t.MemoryUsedGiBSeconds / a.meteredSecs * gib)
	} else {
		a.t.MemoryAvgBytes = r.MemoryBytes
	}
	a.t.MemoryPeakBytes = max(a.t.MemoryPeakBytes, r.MemoryBytes)
	a.t.DiskPeakBytes = max(a.t.DiskPeakBytes, r.DiskBytes)
	a.last = r
}

// Baseline takes r as the starting point: what the counters hold then is
// not charged (a warm pool's sandbox, claimed: its boot was nobody's).
func (a *Account) Baseline(r Reading) {
	if r.Time.After(a.last.Time) {
		a.last = r
	}
}

// Skip moves the account's clock to t without charging the time between
// (a pause: nothing runs, and the working set is not held).
func (a *Account) Skip(t time.Time) {
	if t.After(a.last.Time) {
		a.last.Time = t
	}
}

// CPURestarted says the sandbox's CPU counter starts again from zero (a
// runtime recreated its processes and cgroup; its link, and so its byte
// counters, stay): the next reading's CPU time counts in full.
func (a *Account) CPURestarted() {
	a.last.CPUNanos = 0
}

// Totals returns what the account holds, with the wall time by state
// (running, paused) that the caller knows from the sandbox's record.
func (a *Account) Totals(running, paused time.Duration) Totals {
	t := a.t
	t.RunningSeconds = running.Seconds()
	t.PausedSeconds = paused.Seconds()
	t.MemoryRequestedGiBSeconds = float64(a.req.MemoryBytes) / gib * t.RunningSeconds
	return t
}

// delta is how much a cumulative counter grew from prev to now; one that
// went backwards was reset, and counts from zero.
func delta(prev, now uint64) uint64 {
	if now < prev {
		return now
	}
	return now - prev
}
