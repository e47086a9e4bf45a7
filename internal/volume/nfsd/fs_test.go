package nfsd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// layout makes tmp/root (the export) beside tmp/outside (a file that
// must never be read or changed through it), with symlinks in the root
// that point out of it every way a guest could write.
func layout(t testing.TB) (root, outside string) {
	t.Helper()
	tmp := t.TempDir()
	root, outside = filepath.Join(tmp, "root"), filepath.Join(tmp, "outside")
	for _, d := range []string{root + "/dir", outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside+"/secret", []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"abs": outside, "rel": "../outside", "deep": "dir/../../outside", "self": "abs"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func newFS(t testing.TB, root string, ro bool) *FS {
	t.Helper()
	f, err := NewFS(root, ro)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// outsideUntouched fails unless outside holds exactly its secret.
func outsideUntouched(t testing.TB, outside string) {
	t.Helper()
	ents, err := os.ReadDir(outside)
	if err != nil || len(ents) != 1 || ents[0].Name() != "secret" {
		t.Fatalf("outside changed: %v %v", ents, err)
	}
	if b, _ := os.ReadFile(outside + "/secret"); string(b) != "host" {
		t.Fatalf("outside secret changed: %q", b)
	}
}

func TestSymlinksStayInside(t *testing.T) {
	root, outside := layout(t)
	f := newFS(t, root, false)
	for _, l := range []string{"abs", "rel", "deep", "self", "/abs", "../abs", "dir/../../rel"} {
		if _, err := f.Stat(l + "/secret"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat(%s/secret) = %v, want not found", l, err)
		}
		if _, err := f.Open(l + "/secret"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Open(%s/secret) = %v, want not found", l, err)
		}
		// Made inside the root (where the link resolves there), never outside.
		if fl, err := f.Create(l + "/new"); err == nil {
			fl.Close()
		}
		_ = f.MkdirAll(l+"/newdir/sub", 0o755)
		_ = f.Symlink("/etc/passwd", l+"/ln")
		_ = f.Chmod(l+"/secret", 0o777)
		_ = f.Chown(l+"/secret", 1, 1)
		_ = f.Rename(l+"/secret", "stolen")
		_ = f.Remove(l + "/secret")
	}
	outsideUntouched(t, outside)
	if _, err := os.Lstat(filepath.Join(root, "stolen")); err == nil {
		t.Fatal("a rename brought a file in from outside")
	}
}

func TestChangesInside(t *testing.T) {
	root, _ := layout(t)
	f := newFS(t, root, false)
	fl, err := f.Create("dir/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	fl.Close()
	if err := f.MkdirAll("x/y", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := f.Rename("dir/a", "x/y/b"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "x/y/b")); err != nil || string(b) != "hello" {
		t.Fatalf("read back %q, %v", b, err)
	}
	// As the NFS server writes: an existing file, opened with its mode.
	fl, err = f.OpenFile("x/y/b", os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("reopening for a write: %v", err)
	}
	if _, err := fl.Seek(5, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	fl.Close()
	if b, _ := os.ReadFile(filepath.Join(root, "x/y/b")); string(b) != "hello!" {
		t.Fatalf("after a write at 5: %q", b)
	}
	if err := f.Symlink("x/y/b", "lnk"); err != nil {
		t.Fatal(err)
	}
	if tgt, err := f.Readlink("lnk"); err != nil || tgt != "x/y/b" {
		t.Fatalf("Readlink = %q, %v", tgt, err)
	}
	if st, err := f.Lstat("lnk"); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("Lstat(lnk) = %v, %v", st, err)
	}
	if st, err := f.Stat("lnk"); err != nil || st.Size() != 6 {
		t.Fatalf("Stat(lnk) = %v, %v", st, err)
	}
	ents, err := f.ReadDir("x/y")
	if err != nil || len(ents) != 1 || ents[0].Name() != "b" || ents[0].Sys().(*syscall.Stat_t).Ino == 0 {
		t.Fatalf("ReadDir = %v, %v", ents, err)
	}
	if err := f.Remove("x/y/b"); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove("x/y"); err != nil {
		t.Fatal(err)
	}
}

func TestReadOnlyRefusesEveryChange(t *testing.T) {
	root, _ := layout(t)
	if err := os.WriteFile(filepath.Join(root, "dir/f"), []byte("v"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFS(t, root, true)
	fl, err := f.Open("dir/f")
	if err != nil {
		t.Fatalf("a read-only export must still read: %v", err)
	}
	fl.Close()
	for name, err := range map[string]error{
		"create":   func() error { _, err := f.Create("dir/g"); return err }(),
		"open rw":  func() error { _, err := f.OpenFile("dir/f", os.O_RDWR, 0); return err }(),
		"truncate": func() error { _, err := f.OpenFile("dir/f", os.O_WRONLY|os.O_TRUNC, 0); return err }(),
		"mkdir":    f.MkdirAll("d2", 0o755),
		"remove":   f.Remove("dir/f"),
		"rename":   f.Rename("dir/f", "dir/h"),
		"symlink":  f.Symlink("x", "dir/l"),
		"chmod":    f.Chmod("dir/f", 0o777),
		"chown":    f.Chown("dir/f", 1, 1),
		"lchown":   f.Lchown("dir/f", 1, 1),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s on a read-only export: %v, want EROFS", name, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "dir/f")); string(b) != "v" {
		t.Fatalf("file changed: %q", b)
	}
}

func TestSpecialFilesRefused(t *testing.T) {
	root, _ := layout(t)
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFS(t, root, false)
	// A FIFO with no writer would block an open for reading forever.
	if _, err := f.Open("fifo"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("Open(fifo) = %v, want EINVAL", err)
	}
	if _, err := f.Open(strings.Repeat("a/", 3000)); err == nil {
		t.Fatal("an over-long path opened")
	}
}

func TestHandlesFollowRenames(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("open_by_handle_at needs CAP_DAC_READ_SEARCH (root)")
	}
	root, _ := layout(t)
	if err := os.WriteFile(filepath.Join(root, "dir/f"), []byte("v"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHandler(newFS(t, root, false))
	fh := h.ToHandle(nil, []string{"dir", "f"})
	if fh == nil {
		t.Skip("this file system makes no file handles")
	}
	if err := os.Rename(filepath.Join(root, "dir"), filepath.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	_, p, err := h.FromHandle(fh)
	if err != nil || strings.Join(p, "/") != "moved/f" {
		t.Fatalf("FromHandle after a rename = %v, %v", p, err)
	}
	// A fresh handler (a daemon restart) still resolves it.
	_, p, err = newHandler(h.fs).FromHandle(fh)
	if err != nil || strings.Join(p, "/") != "moved/f" {
		t.Fatalf("FromHandle in a new handler = %v, %v", p, err)
	}
	rootFH := h.ToHandle(nil, nil)
	if _, p, err := h.FromHandle(rootFH); err != nil || len(p) != 0 {
		t.Fatalf("root handle = %v, %v", p, err)
	}
	if err := os.Remove(filepath.Join(root, "moved/f")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := newHandler(h.fs).FromHandle(fh); err == nil {
		t.Fatal("a removed file's handle still resolves")
	}
	if _, _, err := h.FromHandle([]byte("garbage-handle")); err == nil {
		t.Fatal("a forged handle resolved")
	}
}

// FuzzPaths: whatever path a guest sends, every operation stays inside
// the root.
func FuzzPaths(f *testing.F) {
	for _, s := range []string{"abs/secret", "../outside/secret", "rel/x", "deep/../rel/secret", "/", "", "dir/../../../..", "self/./secret"} {
		f.Add(s)
	}
	root, outside := layout(f)
	fsys := newFS(f, root, false)
	f.Fuzz(func(t *testing.T, p string) {
		if fl, err := fsys.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644); err == nil {
			_, _ = fl.Write([]byte("x"))
			fl.Close()
		}
		_, _ = fsys.Stat(p)
		_, _ = fsys.ReadDir(p)
		_ = fsys.MkdirAll(p+"/d", 0o755)
		_ = fsys.Chmod(p, 0o600)
		_ = fsys.Rename(p, "r")
		_ = fsys.Remove(p)
		outsideUntouched(t, outside)
	})
}
