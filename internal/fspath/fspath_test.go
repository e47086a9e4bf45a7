package fspath

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// makeTree builds a root with files, directories and hostile symlinks.
func makeTree(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("a/b/c")
	mk("etc")
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link("/", "a/toroot")
	link("../../..", "a/b/up")
	link("../../../../../../etc", "a/b/c/etc")
	link("/etc/passwd", "abs")
	link("b/c", "a/rel")
	link("loop1", "loop2")
	link("loop2", "loop1")
	link("self", "self")
	link("/a/b/../../etc", "dotdot")
	link("missing/deeper", "dangling")
	link("/tmp", "tmp")
	return root
}

func TestResolve(t *testing.T) {
	root := makeTree(t)
	tests := []struct {
		name, path, want string
		noFollow         bool
		errno            syscall.Errno
	}{
		{name: "empty", path: "", want: "/"},
		{name: "root", path: "/", want: "/"},
		{name: "plain", path: "/a/b", want: "/a/b"},
		{name: "relative", path: "a/b", want: "/a/b"},
		{name: "dotdot escape", path: "../../../etc/x", want: "/etc/x"},
		{name: "dotdot middle", path: "/a/../../../../etc/passwd", want: "/etc/passwd"},
		{name: "link to slash", path: "/a/toroot/etc/passwd", want: "/etc/passwd"},
		{name: "link to slash alone", path: "/a/toroot", want: "/"},
		{name: "link up", path: "/a/b/up/etc", want: "/etc"},
		{name: "lexical dotdot first", path: "/a/b/up/../../x", want: "/a/x"},
		{name: "relative link escaping", path: "/a/b/c/etc/passwd", want: "/etc/passwd"},
		{name: "absolute link", path: "/abs", want: "/etc/passwd"},
		{name: "relative link", path: "/a/rel/x", want: "/a/b/c/x"},
		{name: "dotdot in target", path: "/dotdot/passwd", want: "/etc/passwd"},
		{name: "dangling", path: "/dangling", want: "/missing/deeper"},
		{name: "dangling nofollow", path: "/dangling", want: "/dangling", noFollow: true},
		{name: "nofollow middle followed", path: "/a/toroot/abs", want: "/abs", noFollow: true},
		{name: "absolute self link", path: "/tmp/x", errno: syscall.ELOOP},
		{name: "missing then dotdot", path: "/nope/../a", want: "/a"},
		{name: "through file", path: "/etc/passwd/x", want: "/etc/passwd/x"},
		{name: "loop", path: "/loop1", errno: syscall.ELOOP},
		{name: "self loop", path: "/self/x", errno: syscall.ELOOP},
		{name: "self nofollow", path: "/self", want: "/self", noFollow: true},
		{name: "nul", path: "/a\x00b", errno: syscall.EINVAL},
		{name: "too long", path: strings.Repeat("a/", MaxPathLen), errno: syscall.ENAMETOOLONG},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resolveFn := Resolve
			if tt.noFollow {
				resolveFn = ResolveNoFollow
			}
			got, err := resolveFn(root, tt.path)
			if tt.errno != 0 {
				if !errors.Is(err, tt.errno) {
					t.Fatalf("Resolve(%q) = %q, %v; want %v", tt.path, got, err, tt.errno)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tt.path, err)
			}
			if rel := Rel(root, got); rel != tt.want {
				t.Fatalf("Resolve(%q) = %q (in root %q); want %q", tt.path, got, rel, tt.want)
			}
		})
	}
}

func TestResolveLinkChainLimit(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		n       int
		wantErr bool
	}{{MaxLinks, false}, {MaxLinks + 1, true}}
	for _, tt := range tests {
		t.Run(itoa(tt.n), func(t *testing.T) {
			prefix := "n" + itoa(tt.n) + "-"
			for i := 0; i < tt.n; i++ {
				next := prefix + itoa(i+1)
				if i == tt.n-1 {
					next = "target"
				}
				if err := os.Symlink(next, filepath.Join(root, prefix+itoa(i))); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Resolve(root, prefix+"0")
			if tt.wantErr {
				if !errors.Is(err, syscall.ELOOP) {
					t.Fatalf("got %q, %v; want ELOOP", got, err)
				}
				return
			}
			if err != nil || Rel(root, got) != "/target" {
				t.Fatalf("got %q, %v; want /target", got, err)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestRel(t *testing.T) {
	tests := []struct{ root, host, want string }{
		{"/r", "/r", "/"},
		{"/r", "/r/a/b", "/a/b"},
		{"/r/", "/r/a", "/a"},
		{"/r", "/other", "/"},
		{"/", "/etc/x", "/etc/x"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			if got := Rel(tt.root, tt.host); got != tt.want {
				t.Fatalf("Rel(%q, %q) = %q; want %q", tt.root, tt.host, got, tt.want)
			}
		})
	}
}

func TestMkdirAll(t *testing.T) {
	root := makeTree(t)
	tests := []struct {
		name, path, want string
		errno            syscall.Errno
	}{
		{name: "new", path: "/x/y/z", want: "/x/y/z"},
		{name: "existing", path: "/a/b", want: "/a/b"},
		{name: "through root link", path: "/a/toroot/tmp2/q", want: "/tmp2/q"},
		{name: "escape", path: "../../../../m", want: "/m"},
		{name: "through dangling link", path: "/dangling/z", want: "/missing/deeper/z"},
		{name: "file in the way", path: "/etc/passwd/x", errno: syscall.ENOTDIR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MkdirAll(root, tt.path, 0o755)
			if tt.errno != 0 {
				if !errors.Is(err, tt.errno) {
					t.Fatalf("MkdirAll(%q) = %q, %v; want %v", tt.path, got, err, tt.errno)
				}
				return
			}
			if err != nil {
				t.Fatalf("MkdirAll(%q): %v", tt.path, err)
			}
			if Rel(root, got) != tt.want {
				t.Fatalf("MkdirAll(%q) = %q; want %q", tt.path, Rel(root, got), tt.want)
			}
			if fi, err := os.Stat(got); err != nil || !fi.IsDir() {
				t.Fatalf("%s is not a directory: %v", got, err)
			}
		})
	}
}

func TestResolveRelativeRootRefused(t *testing.T) {
	if _, err := Resolve("relative", "/x"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("got %v; want EINVAL", err)
	}
}

// FuzzResolve checks that whatever the path and whatever one extra symlink
// points to, the result stays under root, and that what it names, once the
// kernel follows it, is under root too.
func FuzzResolve(f *testing.F) {
	seeds := [][2]string{
		{"../../../etc/x", "/"},
		{"/a/toroot/../../..", "../../.."},
		{"fz/x", "/"},
		{"fz/../../x", "../../../../"},
		{"loop1", "fz"},
		{"/a/b/up/up/up", "/a/b/up"},
		{"fz/fz/fz", "."},
		{"a//b/./c/../../..", "a/b/c/etc"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	root := makeTree(f)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path, target string) {
		link := filepath.Join(root, "fz")
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return // e.g. NUL bytes or an empty target
		}
		for _, follow := range []bool{true, false} {
			got, err := resolve(root, path, follow)
			if err != nil {
				if !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.EINVAL) &&
					!errors.Is(err, syscall.ENAMETOOLONG) {
					t.Fatalf("Resolve(%q) with fz -> %q: unexpected error %v", path, target, err)
				}
				continue
			}
			if got != root && !strings.HasPrefix(got, root+"/") {
				t.Fatalf("Resolve(%q) with fz -> %q = %q: outside %q", path, target, got, root)
			}
			check := got
			if !follow && got != root {
				check = filepath.Dir(got)
			}
			if real, err := filepath.EvalSymlinks(check); err == nil {
				if real != realRoot && !strings.HasPrefix(real, realRoot+"/") {
					t.Fatalf("Resolve(%q) with fz -> %q = %q which is really %q: outside root", path, target, got, real)
				}
			}
		}
	})
}
