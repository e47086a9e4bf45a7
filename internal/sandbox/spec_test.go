package sandbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name  string
		spec  Spec
		field string // empty: valid
	}{
		{"defaults", Spec{}, ""},
		{"unknown runtime", Spec{Runtime: "docker"}, "runtime"},
		{"negative memory", Spec{MemoryMB: -1}, "memory_mb"},
		{"limit below request", Spec{MemoryMB: 512, MemoryLimitMB: 256}, "memory_limit_mb"},
		{"tiny limit", Spec{MemoryLimitMB: 8}, "memory_limit_mb"},
		{"cpu limit below request", Spec{CPU: 2, CPULimit: 1}, "cpu_limit"},
		{"too many cpus", Spec{CPU: 1000}, "cpu"},
		{"timeout over a day", Spec{Timeout: 25 * time.Hour}, "timeout"},
		{"negative idle", Spec{IdleTimeout: -time.Second}, "idle_timeout"},
		{"bad env name", Spec{Env: map[string]string{"A=B": "x"}}, "env"},
		{"NUL in env", Spec{Env: map[string]string{"A": "x\x00"}}, "env"},
		{"relative workdir", Spec{Workdir: "tmp"}, "workdir"},
		{"bad name", Spec{Name: "../x"}, "name"},
		{"name shaped like an id", Spec{Name: "sb-abcdefghijklmnop"}, "name"},
		{"tag value too long", Spec{Tags: map[string]string{"k": strings.Repeat("v", 257)}}, "tags"},
		{"empty entrypoint word", Spec{Entrypoint: []string{""}}, "entrypoint"},
		{"bad image ref", Spec{Image: "a b"}, "image"},
		{"tiny disk", Spec{DiskMB: 1}, "disk_mb"},
		{"auto resume with nothing pausing", Spec{AutoResume: true}, "auto_resume"},
		{"pause on timeout", Spec{PauseOnTimeout: true, AutoResume: true}, ""},
		{"filesystem-only pause on timeout", Spec{PauseOnTimeout: true, PauseFilesystem: true}, ""},
		{"filesystem-only with nothing pausing", Spec{PauseFilesystem: true}, "pause_filesystem"},
		{"filesystem-only with auto resume", Spec{PauseOnTimeout: true, PauseFilesystem: true, AutoResume: true}, "pause_filesystem"},
		{"filesystem-only with auto pause", Spec{PauseOnTimeout: true, PauseFilesystem: true, AutoPause: true, IdleTimeout: time.Minute}, "pause_filesystem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.spec
			err := s.Normalize()
			if tt.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.Runtime != "gvisor" || s.Timeout != DefaultTimeout || s.MemoryLimitMB != DefaultMemoryMB || s.CPU != DefaultCPU {
					t.Errorf("defaults not applied: %+v", s)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %v does not name %s", err, tt.field)
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("error kind of %v", err)
			}
		})
	}
}

// The CPU limit defaults to the request (a default sandbox has a ceiling),
// and a limit given alone below the default request lowers the request.
func TestNormalizeCPUDefaults(t *testing.T) {
	tests := []struct {
		name             string
		spec             Spec
		cpu, cpuLimit    float64
		memory, memLimit int64
	}{
		{"defaults", Spec{}, DefaultCPU, DefaultCPU, DefaultMemoryMB, DefaultMemoryMB},
		{"limit alone below the default request", Spec{CPULimit: 0.5}, 0.5, 0.5, DefaultMemoryMB, DefaultMemoryMB},
		{"limit alone above the default request", Spec{CPULimit: 3}, DefaultCPU, 3, DefaultMemoryMB, DefaultMemoryMB},
		{"request alone", Spec{CPU: 2}, 2, 2, DefaultMemoryMB, DefaultMemoryMB},
		{"memory limit alone", Spec{MemoryLimitMB: 256}, DefaultCPU, DefaultCPU, 256, 256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.spec
			if err := s.Normalize(); err != nil {
				t.Fatal(err)
			}
			if s.CPU != tt.cpu || s.CPULimit != tt.cpuLimit || s.MemoryMB != tt.memory || s.MemoryLimitMB != tt.memLimit {
				t.Errorf("cpu %g/%g memory %d/%d, want %g/%g %d/%d", s.CPU, s.CPULimit, s.MemoryMB, s.MemoryLimitMB,
					tt.cpu, tt.cpuLimit, tt.memory, tt.memLimit)
			}
		})
	}
}
