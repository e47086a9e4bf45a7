package boundfs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRotate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "console.log")
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if rotated, err := Rotate(filepath.Join(dir, "missing.log")); rotated || err != nil {
		t.Fatalf("Rotate of a missing log: %v, %v", rotated, err)
	}
	small := bytes.Repeat([]byte("a"), 1000)
	mustWrite(t, w, small)
	if rotated, err := Rotate(path); rotated || err != nil {
		t.Fatalf("Rotate of a small log: %v, %v", rotated, err)
	}
	// Past the threshold: the tail goes to .1, the log starts again, and
	// the appending writer writes at its new start.
	big := append(bytes.Repeat([]byte("b"), LogRotateBytes), []byte("END\n")...)
	mustWrite(t, w, big)
	if rotated, err := Rotate(path); !rotated || err != nil {
		t.Fatalf("Rotate of a big log: %v, %v", rotated, err)
	}
	prev, err := os.ReadFile(path + previous)
	if err != nil || len(prev) != LogRotateBytes || !bytes.HasSuffix(prev, []byte("END\n")) {
		t.Fatalf("previous part: %d bytes, %v", len(prev), err)
	}
	mustWrite(t, w, []byte("next\n"))
	if b, _ := os.ReadFile(path); string(b) != "next\n" {
		t.Fatalf("after rotation the log holds %q", b)
	}
	if got := TailLines(path, 2, "|"); !strings.HasSuffix(got, "END|next") {
		t.Fatalf("TailLines = %q", got)
	}
}

// TestRotateSparse: a writer at an offset of its own (not appending) makes
// a log of a huge apparent size; rotating it reads only its tail.
func TestRotateSparse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("far\n"), 1<<40); err != nil {
		t.Skipf("no sparse files of 1 TiB here: %v", err)
	}
	if rotated, err := Rotate(path); !rotated || err != nil {
		t.Fatalf("Rotate: %v, %v", rotated, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != 0 {
		t.Fatalf("log after rotation: %v, %v", fi, err)
	}
	prev, _ := os.ReadFile(path + previous)
	if len(prev) != LogRotateBytes || !bytes.HasSuffix(prev, []byte("far\n")) {
		t.Fatalf("previous part: %d bytes", len(prev))
	}
}

func TestRotateRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "console.log")
	if err := os.Symlink("/etc/passwd", path); err != nil {
		t.Fatal(err)
	}
	if _, err := Rotate(path); err == nil {
		t.Fatal("Rotate followed a symlink")
	}
	if b := Tail(path, 100); b != nil {
		t.Fatalf("Tail followed a symlink: %q", b)
	}
}

func mustWrite(t *testing.T, f *os.File, b []byte) {
	t.Helper()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestMount: a bounded mount holds no more than its bytes and inodes, and
// nothing on it is a usable device, setuid or executable file; Mount and
// Unmount are idempotent.
func TestMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	dir := filepath.Join(t.TempDir(), "bound")
	l := Limits{Bytes: 256 << 10, Inodes: 8}
	if err := Mount(dir, l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Unmount(dir) })
	if err := Mount(dir, l); err != nil {
		t.Fatalf("second Mount: %v", err)
	}
	if ok, err := Mounted(dir); !ok || err != nil {
		t.Fatalf("Mounted = %v, %v", ok, err)
	}
	if n := countMounts(t, dir); n != 1 {
		t.Fatalf("%d mounts at %s after two Mounts", n, dir)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		flag int64
		name string
	}{{unix.ST_NOSUID, "nosuid"}, {unix.ST_NODEV, "nodev"}, {unix.ST_NOEXEC, "noexec"}} {
		if st.Flags&f.flag == 0 {
			t.Errorf("the mount is not %s", f.name)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("mode of the mount: %v, %v", fi, err)
	}

	// Bytes.
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(make([]byte, 1<<20))
	f.Close()
	if !errors.Is(err, unix.ENOSPC) {
		t.Errorf("writing 1 MiB into a 256 KiB mount: %v, want ENOSPC", err)
	}
	// Inodes.
	var inodeErr error
	for i := range 20 {
		if inodeErr = os.WriteFile(filepath.Join(dir, "e", strings.Repeat("x", i+1)), nil, 0o600); errors.Is(inodeErr, unix.ENOENT) {
			if err := os.Mkdir(filepath.Join(dir, "e"), 0o700); err != nil {
				inodeErr = err
				break
			}
			inodeErr = os.WriteFile(filepath.Join(dir, "e", strings.Repeat("x", i+1)), nil, 0o600)
		}
		if inodeErr != nil {
			break
		}
	}
	if !errors.Is(inodeErr, unix.ENOSPC) {
		t.Errorf("creating 20 entries on an 8-inode mount: %v, want ENOSPC", inodeErr)
	}
	_ = os.RemoveAll(filepath.Join(dir, "e"))
	_ = os.Remove(filepath.Join(dir, "fill"))

	// A device node is inert, a setuid binary does not run.
	null := filepath.Join(dir, "null")
	if err := unix.Mknod(null, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod as root: %v", err)
	}
	if f, err := os.OpenFile(null, os.O_WRONLY, 0); err == nil {
		f.Close()
		t.Error("a device node on the mount opened")
	}
	sh := filepath.Join(dir, "sh")
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	if err := os.WriteFile(sh, b, 0o4755); err == nil {
		if err := exec.Command(sh).Run(); err == nil {
			t.Error("a binary on the mount ran")
		}
	}

	if err := Unmount(dir); err != nil {
		t.Fatal(err)
	}
	if err := Unmount(dir); err != nil {
		t.Fatalf("second Unmount: %v", err)
	}
	if ok, _ := Mounted(dir); ok {
		t.Fatal("still mounted")
	}
	if _, err := os.Stat(null); err == nil {
		t.Fatal("the mount's files outlived it")
	}
}

// countMounts counts the mount points at dir in /proc/self/mountinfo.
func countMounts(t *testing.T, dir string) int {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			n++
		}
	}
	return n
}
