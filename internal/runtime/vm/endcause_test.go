package vm

import (
	"strings"
	"testing"

	"corral/internal/runtime"
)

func TestCauseFromConsole(t *testing.T) {
	for _, tt := range []struct {
		name, console, reason, detail string
	}{
		{"sysrq", "[    1.2] sysrq: Trigger a crash\n[    1.2] Kernel panic - not syncing: sysrq triggered crash\n[ 1.3] CPU: 0 PID: 1\n", runtime.CausePanic, "sysrq triggered crash"},
		{"oom panic", "Out of memory: Killed process 12 (python3)\nKernel panic - not syncing: System is deadlocked on memory\n", runtime.CauseOOM, "256 MiB"},
		{"poweroff", "[ 3.1] reboot: Power down\n", runtime.CausePowerOff, "powered itself off"},
		{"reboot", "reboot: Restarting system\r\n", runtime.CausePowerOff, "rebooted"},
		{"last wins", "Kernel panic - not syncing: old\nreboot: Power down\n", runtime.CausePowerOff, "powered"},
		{"oom kill alone", "Out of memory: Killed process 12 (python3)\n", "", ""},
		{"nothing", "corral-vminit: modules loaded\n", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reason, detail := causeFromConsole([]byte(tt.console), 256)
			if reason != tt.reason || !strings.Contains(detail, tt.detail) {
				t.Errorf("cause = %q %q, want %q with %q", reason, detail, tt.reason, tt.detail)
			}
		})
	}
}
