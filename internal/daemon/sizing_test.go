package daemon

import "testing"

// The default bound follows the machine: at least 64, and within what its
// memory and thread limit hold.
func TestAutoMaxSandboxes(t *testing.T) {
	n, err := AutoMaxSandboxes()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memTotal()
	if err != nil {
		t.Fatal(err)
	}
	pids, err := readInt("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MemTotal %d MiB, pid_max %d: %d sandboxes", mem>>20, pids, n)
	if n < minMaxSandboxes {
		t.Fatalf("%d, below the floor %d", n, minMaxSandboxes)
	}
	if n > minMaxSandboxes && (int64(n)*perSandboxMem > mem || int64(n)*perSandboxThreads > pids) {
		t.Fatalf("%d sandboxes do not fit %d MiB and %d threads", n, mem>>20, pids)
	}
}
