package agent

import (
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// A write with an XattrSet replaces the file's attributes under the
// prefix (in place and atomically), leaves other user.* attributes of an
// in-place write alone, answers what it read back, and refuses a set
// outside the user namespace.
func TestWriteXattrs(t *testing.T) {
	env := newFSEnv(t)
	ctx := testCtx(t)
	host := filepath.Join(env.root, "root/f")
	mustWrite(t, host, "x")
	if err := unix.Setxattr(host, "user.probe", []byte("1"), 0); errors.Is(err, unix.ENOTSUP) {
		t.Skip("the test directory's filesystem has no user extended attributes")
	}
	if err := unix.Setxattr(host, "user.e2b.stale", []byte("old"), 0); err != nil {
		t.Fatal(err)
	}
	set := &agentapi.XattrSet{Prefix: "user.e2b.", Values: map[string]string{"author": "ann", "empty": ""}}
	info, err := env.c.WriteFileWith(ctx, "/root/f", strings.NewReader("new"), 0, "", agentapi.WriteOptions{InPlace: true, Xattrs: set})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(info.Xattrs, set.Values) || info.XattrsUnsupported {
		t.Errorf("answer: %v unsupported=%v, want %v", info.Xattrs, info.XattrsUnsupported, set.Values)
	}
	if got := xattr(t, host, "user.e2b.author"); got != "ann" {
		t.Errorf("user.e2b.author = %q", got)
	}
	if got := xattr(t, host, "user.probe"); got != "1" {
		t.Errorf("another user attribute: %q, want it kept", got)
	}
	if _, err := unix.Getxattr(host, "user.e2b.stale", nil); !errors.Is(err, unix.ENODATA) {
		t.Errorf("an attribute the set does not name was kept: %v", err)
	}
	// Atomic, and an empty set clears the prefix.
	info, err = env.c.WriteFileWith(ctx, "/root/f", strings.NewReader("n"), 0, "", agentapi.WriteOptions{Xattrs: &agentapi.XattrSet{Prefix: "user.e2b."}})
	if err != nil || len(info.Xattrs) != 0 {
		t.Errorf("an empty set: %v %v", info.Xattrs, err)
	}
	if _, err := unix.Getxattr(host, "user.e2b.author", nil); !errors.Is(err, unix.ENODATA) {
		t.Errorf("an empty set kept user.e2b.author: %v", err)
	}
	for _, bad := range []*agentapi.XattrSet{
		{Prefix: "trusted."},
		{Prefix: "user.", Values: map[string]string{"": "x"}},
		{Prefix: "user.", Values: map[string]string{strings.Repeat("k", 251): "x"}},
		{Prefix: "user.", Values: map[string]string{"k": strings.Repeat("v", 4096)}},
	} {
		if _, err := env.c.WriteFileWith(ctx, "/root/f", strings.NewReader("n"), 0, "", agentapi.WriteOptions{Xattrs: bad}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("set %.60v: %v, want invalid", bad, err)
		}
	}
	// The agent checks the set itself, whatever a client sent.
	if _, err := agentapi.ParseXattrs(`{"prefix":"security.","values":{"selinux":"x"}}`); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a security.* set parsed: %v", err)
	}
}

func xattr(t *testing.T, path, name string) string {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		t.Fatalf("getxattr %s: %v", name, err)
	}
	return string(buf[:n])
}

// A stat or a listing with a prefix carries each file's and directory's
// attributes under it (not the others, not a symlink's); a prefix outside
// the user namespace is refused.
func TestStatListXattrs(t *testing.T) {
	env := newFSEnv(t)
	ctx := testCtx(t)
	host := filepath.Join(env.root, "root/f")
	mustWrite(t, host, "x")
	if err := unix.Setxattr(host, "user.e2b.k", []byte("v"), 0); errors.Is(err, unix.ENOTSUP) {
		t.Skip("the test directory's filesystem has no user extended attributes")
	}
	for name, val := range map[string]string{"user.other": "o", "user.e2b.bin": "\xff\xfe"} {
		if err := unix.Setxattr(host, name, []byte(val), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Symlink("f", filepath.Join(env.root, "root/link")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k": "v"}
	info, err := env.c.StatXattrs(ctx, "/root/f", "", "user.e2b.")
	if err != nil || !maps.Equal(info.Xattrs, want) {
		t.Errorf("stat: %v %v, want %v (a value that is not UTF-8 left out)", info.Xattrs, err, want)
	}
	if info, err := env.c.Stat(ctx, "/root/f", ""); err != nil || info.Xattrs != nil {
		t.Errorf("a stat without a prefix: %v %v", info.Xattrs, err)
	}
	es, err := env.c.ListDirXattrs(ctx, "/root", 1, "", "user.e2b.")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		switch e.Name {
		case "f":
			if !maps.Equal(e.Xattrs, want) {
				t.Errorf("listing: f has %v", e.Xattrs)
			}
		case "link":
			if e.Xattrs != nil {
				t.Errorf("listing: a symlink has %v", e.Xattrs)
			}
		}
	}
	if _, err := env.c.StatXattrs(ctx, "/root/f", "", "trusted."); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a trusted.* prefix: %v", err)
	}
}
