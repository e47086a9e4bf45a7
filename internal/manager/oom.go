package manager

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"corral/internal/agentapi"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
)

// A process killed for memory in a sandbox that lives on is named as
// such: its exec's end says oom_killed with the sandbox's memory limit,
// and the sandbox's event log gets an "oom" event. Two sources say so:
// the runtime from the host (runtime.OOMCounter: gVisor's cgroup, whose
// OOM kills take single guest processes), polled every 5 s and
// at a killed process's end; and a vm's agent (protocol 3), whose guest
// kernel kills its own processes, on the process's end event.

// oomTimeout bounds one read of the runtime's OOM count.
const oomTimeout = 2 * time.Second

// checkOOM reads the runtime's OOM kill count for h and, when it grew,
// records it and logs an oom event. It reports the time of the latest
// increase seen (zero when none) and the runtime's detail.
func (m *Manager) checkOOM(h *handle.Handle) (time.Time, string) {
	oc, ok := h.Runtime().(runtime.OOMCounter)
	if !ok {
		return time.Time{}, ""
	}
	ctx, cancel := context.WithTimeout(m.ctx, oomTimeout)
	defer cancel()
	kills, detail, err := oc.OOMKills(ctx, h.Ref())
	if err != nil {
		return h.LastOOM(), detail
	}
	if grew := h.SawOOMKills(kills, time.Now()); grew > 0 {
		h.Event("oom", fmt.Sprintf("%s: the kernel killed %d process(es) of the sandbox", detail, grew),
			map[string]string{"oom_kills": strconv.FormatUint(kills, 10)})
	}
	return h.LastOOM(), detail
}

// oomEnd returns what an exec's stream runs on its end event: a process
// that ended killed (137) while a process of the sandbox was OOM-killed
// since it started is marked OOMKilled with the sandbox's limit.
func (m *Manager) oomEnd(h *handle.Handle, started time.Time) func(*agentapi.Event) {
	return func(ev *agentapi.Event) {
		if ev.TimedOut || ev.ExitCode != 137 {
			return
		}
		if ev.OOMKilled { // a vm's agent saw its kernel's OOM killer
			detail := memoryDetail(h)
			h.Event("oom", detail+": the guest kernel killed a process", nil)
			ev.Error = detail
			return
		}
		if last, detail := m.checkOOM(h); !last.IsZero() && !last.Before(started) {
			ev.OOMKilled, ev.Error = true, detail
		}
	}
}

// memoryDetail is runtime.OOMDetail for h's memory limit.
func memoryDetail(h *handle.Handle) string {
	spec := h.Record().Spec
	limit := spec.MemoryLimitMB
	if limit == 0 {
		limit = spec.MemoryMB
	}
	return runtime.OOMDetail(uint64(limit) << 20)
}
