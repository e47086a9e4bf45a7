package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With --retention, an ended sandbox's record, events and entrypoint log
// are pruned once the retention has passed since it ended, by the daemon
// on its own; a running sandbox keeps all three.
func TestRetention(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--retention", "3s")
	ended := d.create("--entrypoint", "echo from-the-entrypoint; sleep 600")
	live := d.create("--entrypoint", "echo still-here; sleep 600")
	for _, id := range []string{ended, live} {
		waitFor(t, 30*time.Second, "the entrypoint's first line", func() bool {
			out, _, _ := d.cli("", "logs", id)
			return strings.Contains(out, "from-the-entrypoint") || strings.Contains(out, "still-here")
		})
	}
	d.mustCLI("rm", ended)
	// Right after rm the record, events and log are still there.
	if out := d.mustCLI("inspect", ended); !strings.Contains(out, `"terminated"`) {
		t.Fatalf("inspect right after rm: %s", out)
	}
	if out := d.mustCLI("events", ended); !strings.Contains(out, "terminated") {
		t.Errorf("events right after rm: %s", out)
	}
	if out := d.mustCLI("logs", ended); !strings.Contains(out, "from-the-entrypoint") {
		t.Errorf("logs right after rm: %q", out)
	}
	logFile := filepath.Join(d.state, "logs", ended+".log")
	start := time.Now()
	waitFor(t, 60*time.Second, "the ended sandbox pruned", func() bool {
		_, _, code := d.cli("", "inspect", ended)
		return code != 0
	})
	t.Logf("pruned %s after its end (retention 3s)", time.Since(start).Round(100*time.Millisecond))
	if _, errs, code := d.cli("", "events", ended); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("events after the retention: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(logFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the entrypoint log is still there: %v", err)
	}
	if out := d.mustCLI("ls", "--all"); strings.Contains(out, ended) || !strings.Contains(out, live) {
		t.Errorf("ls --all after the retention:\n%s", out)
	}
	if out := d.mustCLI("logs", live); !strings.Contains(out, "still-here") {
		t.Errorf("the live sandbox's log: %q", out)
	}
	if out := d.mustCLI("events", live); !strings.Contains(out, "running") {
		t.Errorf("the live sandbox's events: %s", out)
	}
}

// waitFor polls cond every 100 ms until it holds, failing the test after
// timeout.
