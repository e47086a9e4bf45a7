package selftest

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"corral/internal/selftest/probe"
	"corral/pkg/apiv1"
)

// outliveRm starts processes built to survive (new sessions, double
// forks, every catchable signal ignored), removes the sandbox, and looks
// on the host for anything of it left: processes, cgroups, its directory,
// network namespace and slot.
func outliveRm(ctx context.Context, s *session) Result {
	marker := "ol-" + s.nonce
	tried := "start 3 detached double-forked processes that ignore every catchable signal, then `rm` the sandbox"
	d, err := s.create(ctx, "outlive", apiv1.CreateSandboxRequest{MemoryMB: 256})
	if err != nil {
		return inconclusive(tried, err)
	}
	if err := s.probe(ctx, d, "outlive", probe.OutliveArgs{Marker: marker, Count: 3}, nil); err != nil {
		return inconclusive(tried, err)
	}
	time.Sleep(time.Second)
	var r probe.ProcsResult
	if err := s.probe(ctx, d, "procs", probe.ProcsArgs{Marker: "corral-selftest-linger-" + marker}, &r); err != nil {
		return inconclusive(tried, err)
	}
	if len(r.Found) < 3 {
		return Result{Tried: tried, Status: Inconclusive, Evidence: fmt.Sprintf("only %d lingering processes started inside", len(r.Found))}
	}
	if _, err := s.c.Terminate(ctx, d.id); err != nil {
		return inconclusive(tried, fmt.Errorf("removing the sandbox: %w", err))
	}
	time.Sleep(time.Second)
	var left []string
	left = append(left, hostProcesses(marker)...)
	left = append(left, hostProcesses(d.id)...)
	left = append(left, cgroupsOf(d.id)...)
	for _, p := range []string{
		s.sandboxDir(d),
		filepath.Join(s.cfg.StateDir, "net", "netns", d.id),
		filepath.Join(s.cfg.StateDir, "net", "slots", d.id+".json"),
		filepath.Join(s.cfg.StateDir, "vm", "sandboxes", d.id),
	} {
		if exists(p) {
			left = append(left, p)
		}
	}
	return verdict(len(left) == 0, tried, "%d lingering processes ran inside; after rm the host holds %d traces of the sandbox (%s)",
		len(r.Found), len(left), joinMax(left, 4))
}
