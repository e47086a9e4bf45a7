package manager

import (
	"context"
	"fmt"
	"syscall"

	"corral/internal/errdefs"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
)

// Quotas of memory snapshots.
const (
	DefaultSnapshotsPerSandbox = 8
	// DefaultSnapshotMinFreeMB is the free disk a snapshot must leave in
	// the snapshot directory's filesystem.
	DefaultSnapshotMinFreeMB = 1024
)

// SnapshotQuota bounds memory snapshots: PerSandbox snapshots of one
// sandbox kept at once, TotalMB of all of them (their sizes on disk), and
// a new one is saved only when its estimated size (the sandbox's memory
// usage and its private writable layer) leaves MinFreeMB free on the
// snapshot directory's filesystem. Zero fields take the defaults; TotalMB
// zero is no overall quota (the daemon sizes one from the disk).
type SnapshotQuota struct {
	PerSandbox int
	TotalMB    int64
	MinFreeMB  int64
}

func (q SnapshotQuota) withDefaults() SnapshotQuota {
	if q.PerSandbox <= 0 {
		q.PerSandbox = DefaultSnapshotsPerSandbox
	}
	if q.MinFreeMB <= 0 {
		q.MinFreeMB = DefaultSnapshotMinFreeMB
	}
	return q
}

// snapshotsPending counts the snapshots being saved now, which the
// records do not show yet.
type snapshotsPending struct {
	bytes int64
	count map[string]int // by source sandbox
}

// reserveSnapshot checks the quotas and the free disk for a new snapshot
// of h and reserves its estimated size until release (after the snapshot
// is recorded, or given up). A refusal is resource_exhausted naming the
// quota, what it allows and what is used.
func (m *Manager) reserveSnapshot(ctx context.Context, h *handle.Handle) (release func(), err error) {
	id, q := h.ID(), m.cfg.SnapshotQuota
	estimate := m.snapshotEstimate(h)
	snaps, err := m.records.ListSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	var used int64
	mine := 0
	for _, s := range snaps {
		used += s.SizeBytes
		if s.SandboxID == id {
			mine++
		}
	}
	free, err := freeBytes(m.cfg.snapshotsDir())
	if err != nil {
		return nil, err
	}
	m.snapMu.Lock()
	defer m.snapMu.Unlock()
	p := &m.snapPending
	if n := mine + p.count[id]; n >= q.PerSandbox {
		return nil, fmt.Errorf("%w: snapshot quota: sandbox %s has %d memory snapshots, the quota per sandbox is %d",
			errdefs.ErrResourceExhausted, id, n, q.PerSandbox)
	}
	if total := used + p.bytes; q.TotalMB > 0 && total+estimate > q.TotalMB<<20 {
		return nil, fmt.Errorf("%w: snapshot quota: about %d MiB asked, %d MiB of the overall quota of %d MiB used",
			errdefs.ErrResourceExhausted, mib(estimate), mib(total), q.TotalMB)
	}
	if avail := free - p.bytes - q.MinFreeMB<<20; estimate > avail {
		return nil, fmt.Errorf("%w: snapshot disk: about %d MiB asked, %d MiB free in %s beyond the %d MiB kept free",
			errdefs.ErrResourceExhausted, mib(estimate), max(mib(avail), 0), m.cfg.snapshotsDir(), q.MinFreeMB)
	}
	if p.count == nil {
		p.count = map[string]int{}
	}
	p.bytes += estimate
	p.count[id]++
	return func() {
		m.snapMu.Lock()
		defer m.snapMu.Unlock()
		p.bytes -= estimate
		if p.count[id]--; p.count[id] <= 0 {
			delete(p.count, id)
		}
	}, nil
}

// snapshotEstimate is what a snapshot of h will take on disk, about: the
// memory its runtime says it uses (else its memory limit) plus what its
// directory holds (gVisor's private layer, a vm's scratch disk).
func (m *Manager) snapshotEstimate(h *handle.Handle) int64 {
	mem := h.Record().Spec.MemoryLimitMB << 20
	if r, ok := h.Runtime().(runtime.MemoryReporter); ok {
		if b, err := r.MemoryUsage(h.Ref()); err == nil && b > 0 {
			mem = b
		} else if err != nil {
			m.log.Warn("reading a sandbox's memory usage; estimating its snapshot from its limit", "sandbox", h.ID(), "err", err)
		}
	}
	return mem + diskUsage(h.Ref().Dir)
}

// freeBytes is the space available on dir's filesystem.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("reading the free disk of %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

func mib(b int64) int64 { return (b + 1<<20 - 1) >> 20 }
