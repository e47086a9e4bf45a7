package volume

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"corral/internal/errdefs"
)

// newStore needs root: volumes are loop-mounted.
func newStore(t *testing.T) *Store {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to loop-mount a volume")
	}
	dir := t.TempDir()
	st, err := Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mnts, _ := filepath.Glob(filepath.Join(dir, "*", mountDir))
		for _, m := range mnts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	})
	return st
}

func TestStoreLifecycle(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	if _, err := st.Create(ctx, "../x", 1); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("create ../x: %v", err)
	}
	if _, err := st.Create(ctx, "v", MaxSizeGiB+1); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("create too large: %v", err)
	}
	v, err := st.Create(ctx, "v", 1)
	if err != nil || v.SizeGiB != 1 {
		t.Fatalf("create: %+v %v", v, err)
	}
	if _, err := st.Create(ctx, "v", 1); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("create twice: %v", err)
	}
	// Allocated, not sparse: its blocks are the host's from now on.
	var stat syscall.Stat_t
	if err := syscall.Stat(st.Image("v"), &stat); err != nil || stat.Blocks*512 < 1<<30 {
		t.Errorf("image allocates %d bytes, want 1 GiB (%v)", stat.Blocks*512, err)
	}
	root, err := st.HostDir(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := st.HostDir(ctx, "v"); err != nil || again != root {
		t.Errorf("second HostDir: %q %v", again, err)
	}
	if used, size, ok := st.Usage("v"); !ok || size < 900<<20 || used > size {
		t.Errorf("usage: %d of %d (%v)", used, size, ok)
	}
	if err := st.Unmount(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := st.Usage("v"); ok {
		t.Errorf("usage reported while unmounted")
	}
	if l, err := st.List(); err != nil || len(l) != 1 || l[0].Name != "v" {
		t.Errorf("list: %+v %v", l, err)
	}
	if err := st.Remove(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get("v"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after remove: %v", err)
	}
	if err := st.Remove(ctx, "v"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("remove twice: %v", err)
	}
}

// The host-side calls resolve every path inside the volume, whatever
// links a sandbox left there.
func TestFilesStayInside(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	if _, err := st.Create(ctx, "v", 1); err != nil {
		t.Fatal(err)
	}
	root, err := st.HostDir(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	for name, target := range map[string]string{"abs": outside, "up": "../../../../../..", "etc": "/etc"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := WriteFile(root, "/dir/sub/f", strings.NewReader("hi"), 0o600); err != nil || e.Size != 2 || e.Path != "/dir/sub/f" {
		t.Fatal(err)
	}
	f, fi, err := OpenFile(root, "dir/../dir/sub/f")
	if err != nil || fi.Size() != 2 {
		t.Fatalf("open: %v", err)
	}
	f.Close()
	for _, p := range []string{"/abs/x", "/up" + outside + "/x", "/../../" + outside + "/x"} {
		if _, err := WriteFile(root, p, strings.NewReader("escape"), 0o644); err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("write %s: %v", p, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("writes through links landed outside the volume: %v", ents)
	}
	// etc -> /etc is itself, inside the volume: a loop, never the host's.
	if _, _, err := OpenFile(root, "/etc/passwd"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("open /etc/passwd through a link: %v", err)
	}
	// up -> ../../.. stops at the volume's root.
	if f, _, err := OpenFile(root, "/up/dir/sub/f"); err != nil {
		t.Errorf("open /up/dir/sub/f: %v", err)
	} else {
		f.Close()
	}
	if _, err := WriteFile(root, "/etc", strings.NewReader("x"), 0o644); err == nil {
		t.Errorf("write over a final symlink succeeded")
	}
	ents, err := ReadDir(root, "/")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, e := range ents {
		kinds[e.Name] = e.Type
	}
	if kinds["dir"] != "dir" || kinds["etc"] != "symlink" {
		t.Errorf("readdir: %v", kinds)
	}
}
