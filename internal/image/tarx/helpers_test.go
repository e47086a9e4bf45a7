package tarx

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ent is one tar entry of a test archive.
type ent struct {
	name string
	typ  byte
	body string
	link string
	mode int64
	uid  int
	gid  int
	pax  map[string]string
}

var epoch = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, body: body, mode: 0o644} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, to string) ent {
	return ent{name: name, typ: tar.TypeSymlink, link: to, mode: 0o777}
}
func hardlink(name, to string) ent { return ent{name: name, typ: tar.TypeLink, link: to, mode: 0o644} }
func xattrFile(name, key, value string) ent {
	return ent{name: name, typ: tar.TypeReg, body: "x", mode: 0o644, pax: map[string]string{key: value}}
}
func node(name string, typ byte) ent {
	return ent{name: name, typ: typ, mode: 0o644}
}

// mkTar builds a tar stream from entries.
func mkTar(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		hdr := &tar.Header{
			Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode,
			Uid: e.uid, Gid: e.gid, ModTime: epoch, PAXRecords: e.pax,
			Size: int64(len(e.body)), Format: tar.FormatPAX,
		}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("writing header %q: %v", e.name, err)
		}
		if hdr.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sandbox lays out base/outside/sentinel and base/outside/in/dst, so that
// an archive climbing out of dst by one, two or three levels meets
// something the test watches.
type sandbox struct {
	base, outside, dst string
}

func newSandbox(t testing.TB) sandbox {
	t.Helper()
	base := t.TempDir()
	// Undo read-only modes an archive set, so TempDir's cleanup can
	// remove everything even when not root. Registered after TempDir, so
	// it runs first.
	t.Cleanup(func() {
		filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o700)
			}
			return nil
		})
	})
	s := sandbox{base: base, outside: filepath.Join(base, "outside")}
	s.dst = filepath.Join(s.outside, "in", "dst")
	if err := os.MkdirAll(s.dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"sentinel", "in/sentinel"} {
		if err := os.WriteFile(filepath.Join(s.outside, p), []byte("untouched"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// snapshot describes everything under base except dst.
func (s sandbox) snapshot(t testing.TB) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(s.base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == s.dst {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d %v", info.Mode(), info.Size(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		}
		m[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkOutside fails the test if anything outside dst differs from before.
func (s sandbox) checkOutside(t testing.TB, before map[string]string) {
	t.Helper()
	after := s.snapshot(t)
	for p, d := range after {
		if before[p] != d {
			t.Errorf("outside dst: %s changed: %q -> %q", p, before[p], d)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("outside dst: %s removed", p)
		}
	}
}

// duSize is the total size of the regular files under dir.
func duSize(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// withWalk runs f once with openat2 and once with the component walk.
func withWalk(t *testing.T, f func(t *testing.T)) {
	for _, walk := range []bool{false, true} {
		t.Run(fmt.Sprintf("walk=%v", walk), func(t *testing.T) {
			old := noOpenat2.Load()
			noOpenat2.Store(walk)
			defer noOpenat2.Store(old)
			f(t)
		})
	}
}
