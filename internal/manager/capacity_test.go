package manager

import (
	"context"
	"errors"
	"strings"
	"testing"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// tryCreate is create that returns the error.
func (e *env) tryCreate(spec sandbox.Spec) (*sandbox.Sandbox, error) {
	spec.User = or(spec.User, selfUser())
	return e.m.Create(context.Background(), spec)
}

// Admission reserves memory and CPU requests against the capacity times
// its overcommit factor, frees them when a sandbox ends, and refuses
// outright a sandbox whose memory limit the host could never hold.
func TestAdmissionByResources(t *testing.T) {
	tests := []struct {
		name    string
		cap     Capacity
		fits    []sandbox.Spec // admitted, in order
		refused sandbox.Spec
		kind    error
		words   []string // in the refusal's message
	}{
		{"memory", Capacity{MemoryMB: 2048, MemoryOvercommit: 1},
			[]sandbox.Spec{{MemoryMB: 1024}, {MemoryMB: 1024}}, sandbox.Spec{MemoryMB: 512},
			errdefs.ErrResourceExhausted, []string{"memory", "asked 512 MiB", "0 MiB free", "2048 MiB reserved by 2 sandboxes"}},
		{"memory overcommit", Capacity{MemoryMB: 1024, MemoryOvercommit: 2},
			[]sandbox.Spec{{MemoryMB: 1024}, {MemoryMB: 768}}, sandbox.Spec{MemoryMB: 512},
			errdefs.ErrResourceExhausted, []string{"memory", "asked 512 MiB", "256 MiB free", "overcommit 2"}},
		{"limit beyond the host", Capacity{MemoryMB: 2048, MemoryOvercommit: 4},
			nil, sandbox.Spec{MemoryMB: 512, MemoryLimitMB: 4096},
			errdefs.ErrInvalidArgument, []string{"memory_limit_mb", "4096 MiB", "2048 MiB"}},
		{"request beyond the host", Capacity{MemoryMB: 2048, MemoryOvercommit: 4},
			nil, sandbox.Spec{MemoryMB: 30000, MemoryLimitMB: 30000},
			errdefs.ErrInvalidArgument, []string{"memory_mb: 30000 MiB", "2048 MiB"}},
		{"cpu", Capacity{CPUMilli: 2000, CPUOvercommit: 1.5},
			[]sandbox.Spec{{CPU: 1}, {CPU: 1.5}}, sandbox.Spec{CPU: 1},
			errdefs.ErrResourceExhausted, []string{"cpu", "asked 1 cores", "0.5 free"}},
		{"cpu request beyond the host", Capacity{CPUMilli: 2000, CPUOvercommit: 8},
			nil, sandbox.Spec{CPU: 3},
			errdefs.ErrInvalidArgument, []string{"cpu", "3 cores"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.m.cfg.Capacity = tt.cap.withDefaults()
			var ids []string
			for _, s := range tt.fits {
				ids = append(ids, e.create(s).ID)
			}
			_, err := e.tryCreate(tt.refused)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("refused create: %v, want %v", err, tt.kind)
			}
			for _, w := range tt.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q does not say %q", err, w)
				}
			}
			if len(ids) == 0 {
				return
			}
			u := e.m.Usage()
			if u.Sandboxes != len(ids) {
				t.Errorf("usage counts %d sandboxes, want %d", u.Sandboxes, len(ids))
			}
			// Ending the first frees its reservation for the one refused.
			if _, err := e.m.Terminate(context.Background(), ids[0], sandbox.EndTerminated, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := e.tryCreate(tt.refused); err != nil {
				t.Fatalf("create after a sandbox ended: %v", err)
			}
		})
	}
}

// Usage sums the requests of the admitted sandboxes.
func TestUsage(t *testing.T) {
	e := newEnv(t)
	e.m.cfg.Capacity = Capacity{MemoryMB: 4096, CPUMilli: 2000, MemoryOvercommit: 1.5, CPUOvercommit: 4}
	e.create(sandbox.Spec{MemoryMB: 300, CPU: 0.5})
	e.create(sandbox.Spec{MemoryMB: 200, CPU: 2})
	u := e.m.Usage()
	want := Usage{Capacity: e.m.cfg.Capacity, AdmittableMemoryMB: 6144, AdmittableCPUMilli: 8000,
		ReservedMemoryMB: 500, ReservedCPUMilli: 2500, Sandboxes: 2, MaxSandboxes: 4}
	if u != want {
		t.Errorf("usage %+v, want %+v", u, want)
	}
}
