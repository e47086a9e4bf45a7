package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
)

// threeLayers builds bottom, middle and top layers; the top one deletes
// a/gone with a whiteout and makes d opaque.
func threeLayers(t *testing.T, s *Store) []Digest {
	bottom := addLayer(t, s, entry{"a/", ""}, entry{"a/keep", "bottom"}, entry{"a/gone", "x"},
		entry{"d/", ""}, entry{"d/lower", "hidden"}, entry{"shared", "bottom"})
	middle := addLayer(t, s, entry{"b/", ""}, entry{"b/mid", "middle"}, entry{"shared", "middle"})
	top := addLayer(t, s, entry{"a/", ""}, entry{"a/.wh.gone", ""},
		entry{"d/", ""}, entry{"d/.wh..wh..opq", ""}, entry{"d/new", "top"})
	return []Digest{bottom.Digest, middle.Digest, top.Digest}
}

func mountCount(t *testing.T, target string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && f[4] == target {
			n++
		}
	}
	return n
}

func unmountAll(t *testing.T, s *Store) {
	t.Cleanup(func() {
		ents, _ := os.ReadDir(s.path("mounts"))
		for _, e := range ents {
			unix.Unmount(s.path("mounts", e.Name()), unix.MNT_DETACH)
		}
	})
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestRootFSStacksLayers(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	unmountAll(t, s)
	layers := threeLayers(t, s)
	img, err := s.PutImage(layers, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range []string{"sb-aaaaaaaaaaaaaaab", "sb-aaaaaaaaaaaaaaac"} {
		if err := s.Lease(sb, img.Digest); err != nil {
			t.Fatal(err)
		}
	}
	dir1, err := s.RootFS(img.Digest)
	if err != nil {
		t.Fatal(err)
	}
	dir2, err := s.RootFS(img.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if dir1 != dir2 || dir1 != s.path("mounts", img.Digest.Hex()) {
		t.Fatalf("RootFS = %s, %s; want one shared mount", dir1, dir2)
	}
	if n := mountCount(t, dir1); n != 1 {
		t.Fatalf("%s mounted %d times", dir1, n)
	}

	if got := readFile(t, dir1, "a", "keep"); got != "bottom" {
		t.Errorf("a/keep = %q", got)
	}
	if got := readFile(t, dir1, "shared"); got != "middle" {
		t.Errorf("shared = %q, want the middle layer's", got)
	}
	if got := readFile(t, dir1, "b", "mid"); got != "middle" {
		t.Errorf("b/mid = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir1, "a", "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a/gone survives its whiteout: %v", err)
	}
	if got := names(t, filepath.Join(dir1, "d")); !slices.Equal(got, []string{"new"}) {
		t.Errorf("opaque d shows %v, want [new]", got)
	}
	if fi, err := os.Lstat(filepath.Join(dir1, mpAgent)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("%s: %v, %v", mpAgent, fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(dir1, mpChan)); err != nil || !fi.IsDir() {
		t.Errorf("%s: %v, %v", mpChan, fi, err)
	}
	// Read-only, and no layer got the mount points written into it.
	if err := os.WriteFile(filepath.Join(dir1, "new"), nil, 0o644); err == nil {
		t.Error("the shared root is writable")
	}
	for _, l := range layers {
		if _, err := os.Lstat(filepath.Join(s.layerDir(l), "fs", ".corral")); err == nil {
			t.Errorf("layer %s got /.corral written into it", l)
		}
	}
	// Shared, not copied: the file seen through the mount is the layer's
	// inode, and the mount directory's own filesystem holds nothing.
	if a, b := inode(t, filepath.Join(dir1, "a", "keep")), inode(t, filepath.Join(s.layerDir(layers[0]), "fs", "a", "keep")); a != b {
		t.Errorf("a/keep inode %d through the mount, %d in the layer: copied?", a, b)
	}
}

func TestRootFSSingleLayer(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	unmountAll(t, s)
	with := addLayer(t, s, entry{".corral/", ""}, entry{".corral/corral", ""}, entry{".corral/run/", ""}, entry{"f", "1"})
	img, _ := s.PutImage([]Digest{with.Digest}, ImageConfig{})
	dir, err := s.RootFS(img.Digest)
	if err != nil || dir != filepath.Join(s.layerDir(with.Digest), "fs") {
		t.Fatalf("RootFS = %s, %v; want the layer's own directory", dir, err)
	}
	without := addLayer(t, s, entry{"f", "2"})
	img2, _ := s.PutImage([]Digest{without.Digest}, ImageConfig{})
	dir, err = s.RootFS(img2.Digest)
	if err != nil || dir != s.path("mounts", img2.Digest.Hex()) {
		t.Fatalf("RootFS = %s, %v; want a mount with the store's mount-point layer", dir, err)
	}
	if got := readFile(t, dir, "f"); got != "2" {
		t.Fatalf("f = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(dir, mpAgent)); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s: %v", mpAgent, err)
	}
}

func TestMountOverlayOptionTooLong(t *testing.T) {
	dirs := make([]string, 400)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	err := mountOverlay(t.TempDir(), dirs)
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "lowerdir") {
		t.Fatalf("err = %v, want a clear lowerdir-length error", err)
	}
}

func TestLookupStacked(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	layers := threeLayers(t, s)
	var top []string
	for i := len(layers) - 1; i >= 0; i-- {
		top = append(top, filepath.Join(s.layerDir(layers[i]), "fs"))
	}
	for _, tt := range []struct {
		path string
		ok   bool
	}{{"a/keep", true}, {"a/gone", false}, {"d/lower", false}, {"d/new", true}, {"b/mid", true}, {"nope", false}} {
		if _, ok := lookupStacked(top, tt.path); ok != tt.ok {
			t.Errorf("lookupStacked(%s) = %v", tt.path, ok)
		}
	}
}

func TestPrune(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	unmountAll(t, s)
	layers := threeLayers(t, s)
	extra := addLayer(t, s, entry{"extra", "1"})
	orphan := addLayer(t, s, entry{"orphan", "1"})

	tagged, _ := s.PutImage(layers[:1], ImageConfig{})
	leased, _ := s.PutImage(layers, ImageConfig{})
	loose, _ := s.PutImage([]Digest{layers[0], extra.Digest}, ImageConfig{})
	if err := s.Tag("keep:1", tagged.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.Lease("sb-aaaaaaaaaaaaaaab", leased.Digest); err != nil {
		t.Fatal(err)
	}
	leasedDir, err := s.RootFS(leased.Digest)
	if err != nil {
		t.Fatal(err)
	}
	looseDir, err := s.RootFS(loose.Digest)
	if err != nil {
		t.Fatal(err)
	}

	rep, err := s.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Images, []Digest{loose.Digest}) || !slices.Equal(rep.Mounts, []Digest{loose.Digest}) {
		t.Fatalf("report %+v: want the loose image and its mount", rep)
	}
	gotLayers := slices.Clone(rep.Layers)
	wantLayers := []Digest{extra.Digest, orphan.Digest}
	slices.Sort(gotLayers)
	slices.Sort(wantLayers)
	if !slices.Equal(gotLayers, wantLayers) || rep.Bytes != 2 {
		t.Fatalf("pruned layers %v (%d bytes), want %v", rep.Layers, rep.Bytes, wantLayers)
	}
	if mountCount(t, looseDir) != 0 {
		t.Fatalf("%s still mounted", looseDir)
	}
	if _, err := os.Lstat(looseDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s not removed: %v", looseDir, err)
	}
	if mountCount(t, leasedDir) != 1 || readFile(t, leasedDir, "b", "mid") != "middle" {
		t.Fatal("the leased image's mount went")
	}
	for _, l := range layers {
		if _, err := s.Layer(l); err != nil {
			t.Fatalf("used layer %s: %v", l, err)
		}
	}
	requireEmptyTmp(t, s)

	// Released and untagged, everything goes.
	if err := s.Release("sb-aaaaaaaaaaaaaaab"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveImage("keep:1"); err != nil {
		t.Fatal(err)
	}
	rep, err = s.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Images) != 1 || len(rep.Mounts) != 1 || len(rep.Layers) != 3 {
		t.Fatalf("second prune %+v", rep)
	}
	for _, dir := range []string{"layers/sha256", "images/sha256", "mounts", "tmp"} {
		if n := names(t, s.path(dir)); len(n) != 0 {
			t.Fatalf("%s holds %v", dir, n)
		}
	}
}

func TestPruneGraceKeepsFreshLayers(t *testing.T) {
	s := newStore(t)
	s.grace = defaultGrace
	l := addLayer(t, s, entry{"fresh", "1"})
	if rep, err := s.Prune(context.Background()); err != nil || len(rep.Layers) != 0 {
		t.Fatalf("Prune = %+v, %v", rep, err)
	}
	if _, err := s.Layer(l.Digest); err != nil {
		t.Fatal(err)
	}
}

func TestReopenKeepsLeasesAndImages(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	l := addLayer(t, s, entry{"a", "1"})
	img, _ := s.PutImage([]Digest{l.Digest}, ImageConfig{Cmd: []string{"sh"}})
	untagged, _ := s.PutImage([]Digest{l.Digest}, ImageConfig{Cmd: []string{"bash"}})
	if err := s.Tag("app:1", img.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.Lease("sb-aaaaaaaaaaaaaaab", untagged.Digest); err != nil {
		t.Fatal(err)
	}
	// An interrupted extraction left work in tmp.
	if err := os.MkdirAll(filepath.Join(root, "tmp", "layer-123", "fs"), 0o755); err != nil {
		t.Fatal(err)
	}

	s2, err := Open(root, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	s2.grace = 0
	requireEmptyTmp(t, s2)
	if got, err := s2.Resolve("app:1"); err != nil || got.Digest != img.Digest || !slices.Equal(got.Config.Cmd, []string{"sh"}) {
		t.Fatalf("Resolve after reopen = %+v, %v", got, err)
	}
	if leases, err := s2.Leases(); err != nil || leases["sb-aaaaaaaaaaaaaaab"] != untagged.Digest {
		t.Fatalf("Leases after reopen = %v, %v", leases, err)
	}
	rep, err := s2.Prune(context.Background())
	if err != nil || len(rep.Images)+len(rep.Layers) != 0 {
		t.Fatalf("Prune after reopen = %+v, %v; want nothing freed", rep, err)
	}
}
