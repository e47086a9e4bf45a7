package e2e

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFilesRoundTrip64MiB(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create()
	dir := t.TempDir()
	src := filepath.Join(dir, "big")
	data := make([]byte, 64<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	d.mustCLI("fs", "put", id, src, "/data/big.bin")
	dst := filepath.Join(dir, "back")
	d.mustCLI("fs", "get", id, "/data/big.bin", dst)
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("64 MiB file came back different (%d bytes)", len(got))
	}
	if out := d.mustCLI("fs", "ls", id, "/data"); !strings.Contains(out, "big.bin") || !strings.Contains(out, "67108864") {
		t.Errorf("fs ls: %s", out)
	}
	d.mustCLI("fs", "mkdir", id, "/data/a/b/c")
	d.mustCLI("fs", "rm", "-r", id, "/data")
	if _, _, code := d.cli("", "fs", "get", id, "/data/big.bin", "-"); code == 0 {
		t.Error("file still readable after fs rm -r")
	}
}

// Paths from the API are hostile: they resolve inside the sandbox root.
func TestFilesCannotEscape(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create()
	marker := "corral-escape-" + filepath.Base(d.state)
	src := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(src, []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostTargets := []string{"/etc/" + marker, "/" + marker, "/tmp/" + marker}
	t.Cleanup(func() {
		for _, p := range hostTargets {
			os.Remove(p)
		}
	})

	// A relative path climbing out of the home directory.
	_, errs, code := d.cli("", "fs", "put", id, src, "../../../etc/"+marker)
	if code == 0 {
		if out := d.mustCLI("exec", id, "--", "cat", "/etc/"+marker); out != "inside\n" {
			t.Errorf("../ write did not land inside the sandbox: %q", out)
		}
	} else {
		t.Logf("../ write refused: %s", errs)
	}

	// A symlink the sandbox made, pointing at /.
	d.mustCLI("exec", id, "--", "ln", "-s", "/", "/tmp/escape")
	_, errs, code = d.cli("", "fs", "put", id, src, "/tmp/escape/"+marker)
	if code == 0 {
		if out := d.mustCLI("exec", id, "--", "cat", "/"+marker); out != "inside\n" {
			t.Errorf("symlink write did not land inside the sandbox: %q", out)
		}
	} else {
		t.Logf("symlink write refused: %s", errs)
	}
	// And a symlink to a relative climb.
	d.mustCLI("exec", id, "--", "ln", "-s", "../../../../../../tmp", "/root/up")
	d.cli("", "fs", "put", id, src, "/root/up/"+marker)

	for _, p := range hostTargets {
		if exists(p) {
			t.Errorf("a sandbox path write reached the host: %s", p)
		}
	}
}
