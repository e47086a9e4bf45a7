package e2e

import (
	"strings"
	"testing"
	"time"
)

// The first must-show of the foundation: corral run as a user types it.
func TestRun(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	tests := []struct {
		name             string
		stdin            string
		args             []string
		wantOut, wantErr string
		wantCode         int
	}{
		{"python", "", []string{"python3", "-c", "print(6*7)"}, "42\n", "", 0},
		{"exit code", "", []string{"sh", "-c", "exit 7"}, "", "", 7},
		{"separate streams", "", []string{"sh", "-c", "echo out; echo err >&2"}, "out\n", "err\n", 0},
		{"stdin", "hello\n", []string{"cat"}, "hello\n", "", 0},
		{"missing command", "", []string{"no-such-command-xyz"}, "", "", 127},
		{"not executable", "", []string{"/etc/passwd"}, "", "", 126},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := d.cli(tt.stdin, append([]string{"run", "--"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d (stdout %q, stderr %q)", code, tt.wantCode, out, errs)
			}
			if out != tt.wantOut {
				t.Errorf("stdout %q, want %q", out, tt.wantOut)
			}
			if tt.wantErr != "" && errs != tt.wantErr {
				t.Errorf("stderr %q, want %q", errs, tt.wantErr)
			}
		})
	}
	// corral run removes its sandbox: it returns once the command ended
	// and the daemon finishes the teardown in the background (ls may
	// show the sandbox terminating for a moment, never running).
	var out string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out = d.mustCLI("ls")
		if strings.Contains(out, " running ") {
			t.Fatalf("corral run left a running sandbox:\n%s", out)
		}
		if strings.Count(strings.TrimSpace(out), "\n") == 0 {
			return
		}
	}
	t.Errorf("corral run left live sandboxes:\n%s", out)
}
