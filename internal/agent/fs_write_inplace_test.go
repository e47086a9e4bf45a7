package agent

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"corral/internal/errdefs"
)

// An in-place write keeps the file (its inode, mode and the hard links to
// it), creates a missing one 0644, and refuses a FIFO or a directory at
// the path instead of hanging or writing through it.
func TestWriteInPlace(t *testing.T) {
	env := newFSEnv(t)
	ctx := testCtx(t)
	host := filepath.Join(env.root, "root/f")
	mustWrite(t, host, "old contents, longer")
	if err := os.Chmod(host, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(host, filepath.Join(env.root, "root/link")); err != nil {
		t.Fatal(err)
	}
	before := inode(t, host)
	if _, err := env.c.WriteFileInPlace(ctx, "/root/f", strings.NewReader("new"), 0, ""); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(env.root, "root/link"))
	fi, _ := os.Stat(host)
	if inode(t, host) != before || string(b) != "new" || fi.Mode().Perm() != 0o600 {
		t.Errorf("in place: inode kept %v, link reads %q, mode %v", inode(t, host) == before, b, fi.Mode())
	}
	if _, err := env.c.WriteFileInPlace(ctx, "/root/sub/new", strings.NewReader("n"), 0, ""); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(env.root, "root/sub/new")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("a new file: %v %v", fi, err)
	}
	if err := syscall.Mkfifo(filepath.Join(env.root, "root/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := env.c.WriteFileInPlace(ctx, "/root/fifo", strings.NewReader("x"), 0, ""); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a write into a FIFO: %v", err)
	}
	if _, err := env.c.WriteFileInPlace(ctx, "/root", strings.NewReader("x"), 0, ""); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a write over a directory: %v", err)
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// A failed in-place write removes the file it created.
func TestWriteInPlaceFailureRemovesNewFile(t *testing.T) {
	env := newFSEnv(t)
	if _, err := env.c.WriteFileInPlace(testCtx(t), "/root/cut", io.MultiReader(strings.NewReader("part"), failingReader{}), 0, ""); err == nil {
		t.Fatal("a write whose body failed succeeded")
	}
	// The client gives up as its body fails; the agent notices the cut
	// body a moment later.
	waitFor(t, "the failed write's file to go", func() bool {
		_, err := os.Lstat(filepath.Join(env.root, "root/cut"))
		return os.IsNotExist(err)
	})
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("cut") }
