package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A vm memory request beyond what the host can back is refused with a 400
// naming memory_mb and the host's figure; and when QEMU itself fails, the
// error carries QEMU's own words (its stderr, qemu.log) with no host path.
func TestVMMemoryBeyondHost(t *testing.T) {
	// Not parallel: it asks for more guest memory than the host has.
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("no qemu-system-x86_64 on PATH")
	}
	// The real QEMU, asked for guest RAM from a backing file it cannot
	// open under the daemon's state directory: it fails as it would for a
	// host that cannot back the RAM, in its own words.
	// QEMU runs as the sandbox's own uid: the wrapper must be reachable
	// (t.TempDir's parent is root's alone).
	dir, err := os.MkdirTemp("", "corral-e2e-qemu-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "qemu")
	script := "#!/bin/sh\n[ \"$1\" = --version ] && exec " + qemu + " \"$@\"\n" +
		"exec " + qemu + " \"$@\" -object memory-backend-file,id=hog,size=64M,mem-path=\"$CORRAL_VM_DIR/missing/ram\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "--qemu", wrapper)
	out, errs, code := d.cli("", "create", "--runtime", "vm", "--memory", "30000")
	if code == 0 || !strings.Contains(errs, "memory_mb: 30000 MiB") || !strings.Contains(errs, "MiB)") {
		t.Errorf("30000 MiB vm: exit %d, %q %q", code, out, errs)
	}
	out, errs, code = d.cli("", "create", "--runtime", "vm")
	t.Logf("qemu failing: exit %d: %q", code, errs)
	if code == 0 || !strings.Contains(errs, "qemu-system-x86_64: can't open backing store") || !strings.Contains(errs, "for guest RAM") {
		t.Errorf("a failing qemu: exit %d, %q %q, want QEMU's own error", code, out, errs)
	}
	if strings.Contains(errs, d.state) {
		t.Errorf("the error shows the daemon's state directory: %q", errs)
	}
}
