package manager

import (
	"fmt"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// Capacity is what admission reserves sandboxes against. A sandbox
// reserves its requests (memory_mb, cpu), not its limits: a request is
// what the sandbox is promised (the cgroup's memory reservation and CPU
// weight), a limit only a ceiling that idle sandboxes never reach. Live
// sandboxes, those still starting and those waiting in warm pools all
// count. The overcommit factors say how far the requests may add up
// beyond the host: memory is not compressible (a host short of it kills),
// so its factor is small; CPU is (an oversubscribed host slows every
// sandbox in proportion to its weight, and each one's limit bounds what it
// takes), so its factor is large.
type Capacity struct {
	// MemoryMB is the host memory sandboxes may use: MemTotal less what
	// is left to the host and the daemon. 0: memory is not checked.
	MemoryMB int64
	// CPUMilli is the host's CPUs, in 1/1000 cores. 0: CPU is not
	// checked.
	CPUMilli int64
	// MemoryOvercommit and CPUOvercommit multiply the capacity that
	// requests are admitted against; default 1.
	MemoryOvercommit float64
	CPUOvercommit    float64
}

// Usage is the capacity and what the admitted sandboxes reserve of it.
type Usage struct {
	Capacity
	// Admittable is the capacity times its overcommit factor.
	AdmittableMemoryMB int64
	AdmittableCPUMilli int64
	// Reserved sums the requests of every admitted sandbox.
	ReservedMemoryMB int64
	ReservedCPUMilli int64
	Sandboxes        int
	MaxSandboxes     int
}

func (c Capacity) withDefaults() Capacity {
	if c.MemoryOvercommit <= 0 {
		c.MemoryOvercommit = 1
	}
	if c.CPUOvercommit <= 0 {
		c.CPUOvercommit = 1
	}
	return c
}

func (c Capacity) admittableMemoryMB() int64 { return int64(float64(c.MemoryMB) * c.MemoryOvercommit) }
func (c Capacity) admittableCPUMilli() int64 { return int64(float64(c.CPUMilli) * c.CPUOvercommit) }

// cpuMilli is a spec's CPU request in 1/1000 cores.
func cpuMilli(s sandbox.Spec) int64 { return int64(s.CPU * 1000) }

// Usage reports the capacity and what is reserved of it now.
func (m *Manager) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usageLocked()
}

func (m *Manager) usageLocked() Usage {
	c := m.cfg.Capacity
	u := Usage{Capacity: c, AdmittableMemoryMB: c.admittableMemoryMB(), AdmittableCPUMilli: c.admittableCPUMilli(),
		Sandboxes: len(m.handles), MaxSandboxes: m.cfg.MaxSandboxes}
	for _, h := range m.handles {
		spec := h.Record().Spec
		u.ReservedMemoryMB += spec.MemoryMB
		u.ReservedCPUMilli += cpuMilli(spec)
	}
	return u
}

// admissible checks that a sandbox of spec fits what is left of the
// capacity; the caller holds m.mu. A sandbox that could never fit this
// host is invalid_argument naming the field; one that does not fit now is
// resource_exhausted naming the resource, what was asked and what is free.
func (m *Manager) admissible(spec sandbox.Spec) error {
	if len(m.handles) >= m.cfg.MaxSandboxes {
		return fmt.Errorf("%w: sandboxes: %d already live (limit %d)", errdefs.ErrResourceExhausted, len(m.handles), m.cfg.MaxSandboxes)
	}
	c := m.cfg.Capacity
	if c.MemoryMB > 0 && spec.MemoryLimitMB > c.MemoryMB {
		// A limit that is the request (the default) is the request's
		// problem: name the field the caller set.
		if spec.MemoryLimitMB == spec.MemoryMB {
			return errdefs.Invalid("memory_mb", "%d MiB (and so the memory_limit_mb) is more than this host has for sandboxes (%d MiB)", spec.MemoryMB, c.MemoryMB)
		}
		return errdefs.Invalid("memory_limit_mb", "%d MiB is more than this host has for sandboxes (%d MiB)", spec.MemoryLimitMB, c.MemoryMB)
	}
	if c.CPUMilli > 0 && cpuMilli(spec) > c.CPUMilli {
		return errdefs.Invalid("cpu", "a request of %g cores is more than this host has (%g)", spec.CPU, float64(c.CPUMilli)/1000)
	}
	if c.MemoryMB == 0 && c.CPUMilli == 0 {
		return nil
	}
	u := m.usageLocked()
	if free := u.AdmittableMemoryMB - u.ReservedMemoryMB; c.MemoryMB > 0 && spec.MemoryMB > free {
		return fmt.Errorf("%w: memory: asked %d MiB, %d MiB free (%d MiB reserved by %d sandboxes of %d MiB admittable: %d MiB x overcommit %g)",
			errdefs.ErrResourceExhausted, spec.MemoryMB, max(free, 0), u.ReservedMemoryMB, u.Sandboxes, u.AdmittableMemoryMB, c.MemoryMB, c.MemoryOvercommit)
	}
	if free := u.AdmittableCPUMilli - u.ReservedCPUMilli; c.CPUMilli > 0 && cpuMilli(spec) > free {
		return fmt.Errorf("%w: cpu: asked %g cores, %g free (%g reserved by %d sandboxes of %g admittable: %g x overcommit %g)",
			errdefs.ErrResourceExhausted, spec.CPU, float64(max(free, 0))/1000, float64(u.ReservedCPUMilli)/1000, u.Sandboxes,
			float64(u.AdmittableCPUMilli)/1000, float64(c.CPUMilli)/1000, c.CPUOvercommit)
	}
	return nil
}
