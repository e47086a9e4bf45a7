package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// A memory hog under --memory-limit 256 is killed or contained, and the
// daemon and a neighbour keep working.
func TestMemoryHogContained(t *testing.T) {
	// Not parallel: it drives the host toward its memory limit.
	d := startDaemon(t)
	neighbour := d.create()
	hog := d.create("--memory-limit", "256")
	out, errs, code := d.cli("", "exec", hog, "--", "python3", "-c", "b = bytearray(600 << 20); b[::4096] = b'x' * len(b[::4096]); print('allocated')")
	if code == 0 && strings.Contains(out, "allocated") {
		t.Fatalf("600 MiB allocation succeeded under a 256 MiB limit: %q %q", out, errs)
	}
	t.Logf("hog: exit %d, stderr %q", code, errs)
	if got := d.mustCLI("exec", neighbour, "--", "echo", "fine"); got != "fine\n" {
		t.Errorf("neighbour after the hog: %q", got)
	}
	if _, _, code := d.cli("", "ls"); code != 0 {
		t.Error("daemon stopped answering after the hog")
	}
	// Either the hog's sandbox survived (the process was killed inside) and
	// still works, or the whole sandbox was killed and is cleaned up.
	var sb apiv1.Sandbox
	poll(10*time.Second, func() bool {
		if err := json.Unmarshal([]byte(d.mustCLI("inspect", hog)), &sb); err != nil {
			t.Fatal(err)
		}
		return sb.State != "terminating"
	})
	switch sb.State {
	case "running":
		if got := d.mustCLI("exec", hog, "--", "echo", "survived"); got != "survived\n" {
			t.Errorf("hog sandbox after the kill: %q", got)
		}
	case "terminated":
		// Killed for memory: the end says so (TestEndCauses).
		if sb.EndReason != "oom" || !strings.Contains(sb.Error, "out of memory (the sandbox's memory limit is 256 MiB)") {
			t.Errorf("hog sandbox ended as %q (%q), want oom naming the limit", sb.EndReason, sb.Error)
		}
		d.assertNoLeaks(t, []string{hog})
	default:
		t.Errorf("hog sandbox is %s", sb.State)
	}
}

// A fork bomb in one sandbox does not stop another from running echo.
func TestForkBombContained(t *testing.T) {
	// Not parallel: it drives the host toward its process limit.
	d := startDaemon(t)
	bomb := d.create("--memory-limit", "256", "--cpu-limit", "1")
	other := d.create()
	d.mustCLI("exec", bomb, "--", "sh", "-c", "nohup sh -c 'b() { b | b & }; b' >/dev/null 2>&1 &")
	time.Sleep(2 * time.Second)
	start := time.Now()
	if got := d.mustCLI("exec", other, "--", "echo", "still-here"); got != "still-here\n" {
		t.Errorf("neighbour during a fork bomb: %q", got)
	}
	t.Logf("echo in the neighbour during the fork bomb took %s", time.Since(start))
	d.mustCLI("rm", bomb)
	d.assertNoLeaks(t, []string{bomb})
}

// A process that ignores SIGTERM and double-forks is gone after rm.
func TestStubbornProcessGoneAfterRm(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create()
	d.mustCLI("exec", id, "--", "sh", "-c", "(trap '' TERM; sh -c \"trap '' TERM; while :; do sleep 1; done\" &) ; sleep 0.2")
	if out := d.mustCLI("exec", id, "--", "sh", "-c", "ps -eo args | grep -c 'while'"); strings.TrimSpace(out) < "1" {
		t.Fatalf("the stubborn process did not start: %q", out)
	}
	d.mustCLI("rm", id)
	d.assertNoLeaks(t, []string{id})
}

// The writable layer is bounded: a sandbox cannot fill the host's disk.
func TestDiskLimit(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create("--disk", "0.25")
	out, errs, code := d.cli("", "exec", id, "--", "dd", "if=/dev/zero", "of=/root/fill", "bs=1M", "count=400")
	if code == 0 || !strings.Contains(errs+out, "No space left") {
		t.Fatalf("400 MiB into a 256 MiB layer: exit %d, %q %q", code, out, errs)
	}
	d.mustCLI("exec", id, "--", "rm", "/root/fill")
	if got := d.mustCLI("exec", id, "--", "sh", "-c", "echo ok > /root/small && cat /root/small"); got != "ok\n" {
		t.Errorf("after freeing space: %q", got)
	}
}
