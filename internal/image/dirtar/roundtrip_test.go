package dirtar

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"corral/internal/image/tarx"
)

// node is what the round trip compares of one file.
type node struct {
	mode     fs.FileMode
	body     string
	link     string
	mtime    int64
	uid, gid uint32
}

// snapshot records every file under root but root itself; owners only
// when withOwners.
func snapshot(t *testing.T, root string, withOwners bool) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		n := node{mode: fi.Mode()}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.body, n.mtime = string(b), fi.ModTime().Unix()
		case fi.IsDir():
			n.mtime = fi.ModTime().Unix()
		case fi.Mode()&fs.ModeSymlink != 0:
			n.link, _ = os.Readlink(p)
		}
		if st := fi.Sys().(*syscall.Stat_t); withOwners {
			n.uid, n.gid = st.Uid, st.Gid
		}
		out[rel] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRoundTrip: what Write (without Normalize) writes, tarx.Extract turns
// back into the same tree, hard links included. Owners are compared only
// as root, since only root can apply them.
func TestRoundTrip(t *testing.T) {
	tree := sampleTree(t)
	mkFile(t, filepath.Join(tree, "deep", "er", "and-a-name-longer-than-a-ustar-header-holds-"+string(bytes.Repeat([]byte("x"), 80))), "long", 0o640)
	asRoot := os.Geteuid() == 0
	if asRoot {
		if err := os.Lchown(filepath.Join(tree, "a.txt"), 1234, 5678); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Log("not root: owners are not compared (extracting owners needs root)")
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(tree, "bin"), old, old); err != nil {
		t.Fatal(err)
	}

	data, _ := writeTar(t, tree, "/", Options{})
	out := t.TempDir()
	if _, err := tarx.Extract(context.Background(), bytes.NewReader(data), out, tarx.Limits{}); err != nil {
		t.Fatalf("extracting: %v", err)
	}

	want, got := snapshot(t, tree, asRoot), snapshot(t, out, asRoot)
	if !reflect.DeepEqual(got, want) {
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s: got %+v, want %+v", name, got[name], w)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s: extracted, not in the source", name)
			}
		}
	}
	h1, err1 := os.Stat(filepath.Join(out, "hard1"))
	h2, err2 := os.Stat(filepath.Join(out, "hard2"))
	if err1 != nil || err2 != nil || !os.SameFile(h1, h2) {
		t.Errorf("hard1 and hard2 are not one file after extraction (%v, %v)", err1, err2)
	}
}
