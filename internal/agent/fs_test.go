package agent

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// newFSEnv serves an agent rooted in a temporary directory with its own
// /etc/passwd and /etc/group.
func newFSEnv(t *testing.T) *testEnv {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"etc", "root", "home/alice"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\nnobody:x:65534:65534::/nonexistent:/bin/false\n"
	group := "root:x:0:\nalice:x:1000:\nnogroup:x:65534:\n"
	mustWrite(t, filepath.Join(root, "etc/passwd"), passwd)
	mustWrite(t, filepath.Join(root, "etc/group"), group)
	return newEnv(t, root)
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) readAll(t *testing.T, path, user string) ([]byte, error) {
	t.Helper()
	rc, size, err := e.c.ReadFile(testCtx(t), path, user)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err == nil && int64(len(b)) != size {
		t.Fatalf("read %d bytes, Content-Length %d", len(b), size)
	}
	return b, err
}

func TestFileWriteRead(t *testing.T) {
	requireRoot(t)
	env := newFSEnv(t)
	ctx := testCtx(t)
	tests := []struct {
		name, path, user string
		mode             os.FileMode
		wantPath         string // inside the root
		wantMode         uint32
		wantOwner        string
	}{
		{name: "absolute", path: "/data/a.txt", wantPath: "/data/a.txt", wantMode: 0o644, wantOwner: "root"},
		{name: "relative to root home", path: "notes.txt", wantPath: "/root/notes.txt", wantMode: 0o644, wantOwner: "root"},
		{name: "relative to user home", path: "x/y.txt", user: "alice", wantPath: "/home/alice/x/y.txt", wantMode: 0o644, wantOwner: "alice"},
		{name: "mode", path: "/bin/tool", mode: 0o755, wantPath: "/bin/tool", wantMode: 0o755, wantOwner: "root"},
		{name: "setuid mode", path: "/bin/suid", mode: 0o755 | os.ModeSetuid, wantPath: "/bin/suid", wantMode: 0o4755, wantOwner: "root"},
		{name: "numeric user", path: "/tmp/n", user: "1234:1234", wantPath: "/tmp/n", wantMode: 0o644, wantOwner: "1234"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte("content of " + tt.name)
			info, err := env.c.WriteFile(ctx, tt.path, bytes.NewReader(data), tt.mode, tt.user)
			if err != nil {
				t.Fatal(err)
			}
			if info.Path != tt.wantPath || info.Type != agentapi.EntryFile || info.Size != int64(len(data)) ||
				info.Mode != tt.wantMode || info.Owner != tt.wantOwner {
				t.Fatalf("WriteFile = %+v; want path %s mode %o owner %s", info, tt.wantPath, tt.wantMode, tt.wantOwner)
			}
			onDisk, err := os.ReadFile(filepath.Join(env.root, tt.wantPath))
			if err != nil || !bytes.Equal(onDisk, data) {
				t.Fatalf("on disk: %q, %v", onDisk, err)
			}
			got, err := env.readAll(t, tt.path, tt.user)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("ReadFile = %q, %v", got, err)
			}
		})
	}
	t.Run("overwrite keeps mode", func(t *testing.T) {
		if _, err := env.c.WriteFile(ctx, "/bin/tool", strings.NewReader("v2"), 0, ""); err != nil {
			t.Fatal(err)
		}
		info, err := env.c.Stat(ctx, "/bin/tool", "")
		if err != nil || info.Mode != 0o755 || info.Size != 2 {
			t.Fatalf("Stat = %+v, %v", info, err)
		}
	})
	t.Run("no temporary files left", func(t *testing.T) {
		matches, _ := filepath.Glob(filepath.Join(env.root, "*", ".corral-upload-*"))
		if len(matches) != 0 {
			t.Fatalf("left behind: %v", matches)
		}
	})
}

func TestFileErrors(t *testing.T) {
	env := newFSEnv(t)
	ctx := testCtx(t)
	if _, err := env.c.MakeDir(ctx, "/dir/sub", 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(env.root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(p, user string) func() error {
		return func() error { _, err := env.readAll(t, p, user); return err }
	}
	tests := []struct {
		name string
		call func() error
		kind error
	}{
		{"read missing", read("/nope", ""), errdefs.ErrNotFound},
		{"read directory", read("/dir", ""), errdefs.ErrInvalidArgument},
		{"read fifo does not block", read("/fifo", ""), errdefs.ErrInvalidArgument},
		{"read empty path", read("", ""), errdefs.ErrInvalidArgument},
		{"read unknown user", read("f", "mallory"), errdefs.ErrInvalidArgument},
		{"write over a directory", func() error {
			_, err := env.c.WriteFile(ctx, "/dir", strings.NewReader("x"), 0, "")
			return err
		}, errdefs.ErrInvalidArgument},
		{"write root", func() error {
			_, err := env.c.WriteFile(ctx, "/", strings.NewReader("x"), 0, "")
			return err
		}, errdefs.ErrInvalidArgument},
		{"stat missing", func() error { _, err := env.c.Stat(ctx, "/nope", ""); return err }, errdefs.ErrNotFound},
		{"list a file", func() error { _, err := env.c.ListDir(ctx, "/etc/passwd", 1, ""); return err }, errdefs.ErrInvalidArgument},
		{"list too deep", func() error { _, err := env.c.ListDir(ctx, "/", 17, ""); return err }, errdefs.ErrInvalidArgument},
		{"remove root", func() error { return env.c.Remove(ctx, "/", true, "") }, errdefs.ErrInvalidArgument},
		{"remove root via dotdot", func() error { return env.c.Remove(ctx, "/dir/../..", true, "") }, errdefs.ErrInvalidArgument},
		{"remove missing", func() error { return env.c.Remove(ctx, "/nope", false, "") }, errdefs.ErrNotFound},
		{"remove non-empty", func() error { return env.c.Remove(ctx, "/dir", false, "") }, errdefs.ErrFailedPrecondition},
		{"rename missing", func() error { _, err := env.c.Rename(ctx, "/nope", "/nope2", ""); return err }, errdefs.ErrNotFound},
		{"rename root", func() error { _, err := env.c.Rename(ctx, "/", "/x", ""); return err }, errdefs.ErrInvalidArgument},
		{"chmod missing", func() error { _, err := env.c.Chmod(ctx, "/nope", 0o600, ""); return err }, errdefs.ErrNotFound},
		{"mkdir through a file", func() error { _, err := env.c.MakeDir(ctx, "/etc/passwd/x", 0, ""); return err }, errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.kind) {
				t.Fatalf("got %v; want %v", err, tt.kind)
			}
		})
	}
}

func TestFileOps(t *testing.T) {
	env := newFSEnv(t)
	ctx := testCtx(t)
	info, err := env.c.MakeDir(ctx, "/a/b/c", 0o700, "")
	if err != nil || info.Type != agentapi.EntryDir || info.Mode != 0o700 || info.Path != "/a/b/c" || info.Name != "c" {
		t.Fatalf("MakeDir = %+v, %v", info, err)
	}
	if _, err := env.c.MakeDir(ctx, "/a/b/c", 0, ""); err != nil {
		t.Fatalf("MakeDir of an existing dir: %v", err)
	}
	if _, err := env.c.WriteFile(ctx, "/a/b/c/f", strings.NewReader("abc"), 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("c/f", filepath.Join(env.root, "a/b/link")); err != nil {
		t.Fatal(err)
	}

	t.Run("stat symlink is lstat", func(t *testing.T) {
		info, err := env.c.Stat(ctx, "/a/b/link", "")
		if err != nil || info.Type != agentapi.EntrySymlink || info.SymlinkTarget != "c/f" {
			t.Fatalf("Stat = %+v, %v", info, err)
		}
	})
	t.Run("read through symlink", func(t *testing.T) {
		if b, err := env.readAll(t, "/a/b/link", ""); err != nil || string(b) != "abc" {
			t.Fatalf("ReadFile = %q, %v", b, err)
		}
	})
	t.Run("list depths", func(t *testing.T) {
		for depth, want := range map[int][]string{
			1: {"/a/b/c", "/a/b/link"},
			2: {"/a/b/c", "/a/b/c/f", "/a/b/link"},
		} {
			entries, err := env.c.ListDir(ctx, "/a/b", depth, "")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Path)
			}
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("depth %d: %v; want %v", depth, got, want)
			}
		}
	})
	t.Run("chmod", func(t *testing.T) {
		info, err := env.c.Chmod(ctx, "/a/b/c/f", 0o600, "")
		if err != nil || info.Mode != 0o600 || info.Permissions != "-rw-------" {
			t.Fatalf("Chmod = %+v, %v", info, err)
		}
	})
	t.Run("rename", func(t *testing.T) {
		info, err := env.c.Rename(ctx, "/a/b/c/f", "/a/g", "")
		if err != nil || info.Path != "/a/g" || info.Size != 3 {
			t.Fatalf("Rename = %+v, %v", info, err)
		}
	})
	t.Run("remove symlink not target", func(t *testing.T) {
		if err := os.Symlink("/a/g", filepath.Join(env.root, "a/glink")); err != nil {
			t.Fatal(err)
		}
		if err := env.c.Remove(ctx, "/a/glink", false, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(env.root, "a/g")); err != nil {
			t.Fatalf("target removed: %v", err)
		}
	})
	t.Run("remove recursive", func(t *testing.T) {
		if err := env.c.Remove(ctx, "/a", true, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(env.root, "a")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("still there: %v", err)
		}
	})
}

func TestFilePathEscapes(t *testing.T) {
	env := newFSEnv(t)
	ctx := testCtx(t)
	name := "corral-escape-" + randomHex(t)
	links := map[string]string{"toroot": "/", "up": "../../../../../..", "hostlink": "/tmp"}
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(env.root, link)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, path string
		escape     string // where an escape would land on the host
		lands      string // where it must land inside the root
	}{
		{"dotdot relative", "../../../../tmp/" + name + "-1", "/tmp/" + name + "-1", "/tmp/" + name + "-1"},
		{"dotdot absolute", "/../../../tmp/" + name + "-2", "/tmp/" + name + "-2", "/tmp/" + name + "-2"},
		{"symlink to slash", "/toroot/tmp/" + name + "-3", "/tmp/" + name + "-3", "/tmp/" + name + "-3"},
		{"symlink up", "/up/tmp/" + name + "-4", "/tmp/" + name + "-4", "/tmp/" + name + "-4"},
		{"absolute symlink", "/hostlink/" + name + "-5", "/tmp/" + name + "-5", "/tmp/" + name + "-5"},
		{"etc", "../../../etc/" + name, "/etc/" + name, "/etc/" + name},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Cleanup(func() { os.Remove(tt.escape) })
			if _, err := env.c.WriteFile(ctx, tt.path, strings.NewReader("x"), 0, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(tt.escape); err == nil {
				t.Fatalf("%s escaped the root to %s", tt.path, tt.escape)
			}
			inRoot := filepath.Join(env.root, tt.lands)
			if b, err := os.ReadFile(inRoot); err != nil || string(b) != "x" {
				t.Fatalf("not written inside the root at %s: %v", inRoot, err)
			}
		})
	}
	t.Run("read host file through symlink", func(t *testing.T) {
		if _, err := env.readAll(t, "/toroot/etc/hostname", ""); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("ReadFile of a host-only file: %v; want not_found", err)
		}
	})
}

func TestFileLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB round trip skipped in -short mode")
	}
	env := newEnv(t, t.TempDir())
	ctx := testCtx(t)
	const size = 64 << 20
	src := io.LimitReader(rand.Reader, size)
	want := sha256.New()
	info, err := env.c.WriteFile(ctx, "/big", io.TeeReader(src, want), 0o600, "")
	if err != nil || info.Size != size {
		t.Fatalf("WriteFile = %+v, %v", info, err)
	}
	rc, n, err := env.c.ReadFile(ctx, "/big", "")
	if err != nil || n != size {
		t.Fatalf("ReadFile size %d, %v", n, err)
	}
	defer rc.Close()
	got := sha256.New()
	if m, err := io.Copy(got, rc); err != nil || m != size {
		t.Fatalf("read %d bytes, %v", m, err)
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatal("64 MiB round trip is not byte-identical")
	}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 16)
	for _, c := range b {
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}

func TestWriteResolvConf(t *testing.T) {
	root := t.TempDir()
	// A symlink the sandbox made must be replaced, not followed.
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "etc", "resolv.conf")); err != nil {
		t.Fatal(err)
	}
	if err := writeResolvConf(root, []netip.Addr{netip.MustParseAddr("10.88.0.1")}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "etc", "resolv.conf"))
	if err != nil || !strings.Contains(string(b), "nameserver 10.88.0.1\n") {
		t.Fatalf("resolv.conf = %q, %v", b, err)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("the write followed the symlink out of the root: %v", err)
	}
}

// A request's user is the home its relative paths start at and the owner
// of what it creates: the file, the parents a write makes, and every
// directory a mkdir makes (not the ones that were there).
func TestFileUser(t *testing.T) {
	requireRoot(t)
	env := newFSEnv(t)
	ctx := testCtx(t)
	ownerOf := func(p string) uint32 {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(env.root, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid
	}
	if _, err := env.c.MakeDir(ctx, "proj/src", 0, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"home/alice/proj", "home/alice/proj/src"} {
		if got := ownerOf(p); got != 1000 {
			t.Errorf("%s owned by %d, want alice (1000)", p, got)
		}
	}
	if got := ownerOf("home/alice"); got != 0 {
		t.Errorf("mkdir changed the owner of the existing home to %d", got)
	}
	if _, err := env.c.WriteFile(ctx, "/srv/new/f", strings.NewReader("x"), 0, "1000:1000"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"srv", "srv/new", "srv/new/f"} {
		if got := ownerOf(p); got != 1000 {
			t.Errorf("%s owned by %d, want 1000", p, got)
		}
	}
	if info, err := env.c.Stat(ctx, "proj", "alice"); err != nil || info.Path != "/home/alice/proj" {
		t.Fatalf("Stat of a relative path for alice = %+v, %v", info, err)
	}
	if _, err := env.c.Rename(ctx, "proj/src", "proj/lib", "alice"); err != nil {
		t.Fatal(err)
	}
	if es, err := env.c.ListDir(ctx, "proj", 1, "alice"); err != nil || len(es) != 1 || es[0].Path != "/home/alice/proj/lib" {
		t.Fatalf("ListDir for alice = %+v, %v", es, err)
	}
	if _, err := env.c.Chmod(ctx, "proj/lib", 0o700, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := env.c.Remove(ctx, "proj", true, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(env.root, "home/alice/proj")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("remove for alice left %v", err)
	}
	if _, err := env.c.MakeDir(ctx, "x", 0, "mallory"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("mkdir for an unknown user: %v", err)
	}
}
