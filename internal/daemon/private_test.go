package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// A state directory an older version left open (0755, corral.db 0644,
// logs and slots readable) is made private, its owner's bits kept, and
// no symlink's target touched.
func TestTightenState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	outside := filepath.Join(t.TempDir(), "outside")
	for _, d := range []string{"", "logs", "sandboxes/sb-a", "snapshots/snap-a", "net/slots", "agent", "rootfs/debian-bookworm/etc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]os.FileMode{
		"token": 0o644, "corral.db": 0o644, "corral.db-wal": 0o644, "daemon.pid": 0o644,
		"logs/sb-a.log": 0o644, "net/slots/sb-a.json": 0o644, "agent/corral-1": 0o555,
		"rootfs/debian-bookworm/etc/passwd": 0o644,
	}
	for f, m := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), m); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, f), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "logs", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "snapshots", "link")); err != nil {
		t.Fatal(err)
	}
	// The state directory named through a symlink (on another disk).
	viaLink := filepath.Join(t.TempDir(), "state-link")
	if err := os.Symlink(dir, viaLink); err != nil {
		t.Fatal(err)
	}
	if err := tightenState(viaLink); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{
		"": 0o700, "token": 0o600, "corral.db": 0o600, "corral.db-wal": 0o600, "daemon.pid": 0o600,
		"logs": 0o700, "logs/sb-a.log": 0o600, "sandboxes": 0o700, "sandboxes/sb-a": 0o700,
		"snapshots/snap-a": 0o700, "net/slots": 0o700, "net/slots/sb-a.json": 0o600, "agent": 0o700,
		"rootfs": 0o700,
		// Below the private directories' first level nothing changes:
		// only root reaches it.
		"agent/corral-1": 0o555, "rootfs/debian-bookworm": 0o755, "rootfs/debian-bookworm/etc/passwd": 0o644,
	}
	for p, m := range want {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != m {
			t.Errorf("%q: mode %v, want %v", p, fi.Mode().Perm(), m)
		}
	}
	if fi, _ := os.Stat(outside); fi.Mode().Perm() != 0o644 {
		t.Errorf("a symlink's target was changed: %v", fi.Mode())
	}
}

// The log file is created 0600, an existing one made 0600 and appended
// to, and a symlink refused.
func TestOpenLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "corral.log")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("new\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, _ := os.ReadFile(path); string(b) != "old\nnew\n" {
		t.Errorf("log: %q", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	fresh := filepath.Join(dir, "fresh.log")
	if f, err := OpenLog(fresh); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o600 {
		t.Errorf("a new log's mode %v", fi.Mode())
	}
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenLog(link); err == nil {
		f.Close()
		t.Error("a symlinked log file was opened")
	}
}
