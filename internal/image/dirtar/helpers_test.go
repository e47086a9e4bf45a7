package dirtar

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// ent is one tar entry, as the tests compare them.
type ent struct {
	name string
	typ  byte
	link string
	mode int64
	body string
}

func dirEnt(name string, mode int64) ent { return ent{name: name, typ: tar.TypeDir, mode: mode} }
func regEnt(name string, mode int64, body string) ent {
	return ent{name: name, typ: tar.TypeReg, mode: mode, body: body}
}
func linkEnt(name, to string, mode int64) ent {
	return ent{name: name, typ: tar.TypeLink, link: to, mode: mode}
}
func symEnt(name, to string) ent { return ent{name: name, typ: tar.TypeSymlink, link: to, mode: 0o777} }

// readTar returns the entries of a tar and their headers.
func readTar(t *testing.T, data []byte) ([]ent, []*tar.Header) {
	t.Helper()
	var ents []ent
	var hdrs []*tar.Header
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return ents, hdrs
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("reading %s: %v", hdr.Name, err)
		}
		ents = append(ents, ent{name: hdr.Name, typ: hdr.Typeflag, link: hdr.Linkname, mode: hdr.Mode, body: string(body)})
		hdrs = append(hdrs, hdr)
	}
}

// writeTar runs Write and fails the test on error.
func writeTar(t *testing.T, src, dst string, opts Options) ([]byte, Stats) {
	t.Helper()
	var buf bytes.Buffer
	st, err := Write(&buf, src, dst, opts)
	if err != nil {
		t.Fatalf("Write(%s, %s): %v", src, dst, err)
	}
	return buf.Bytes(), st
}

// mkFile writes a file with an exact mode (umask aside).
func mkFile(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// mkDir makes a directory with an exact mode.
func mkDir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// sampleTree makes the tree most tests tar:
//
//	app/            0750
//	  a.txt         "A"
//	  bin/tool      setuid, "T"
//	  empty/        0700
//	  hard1, hard2  one file, "H"
//	  link -> a.txt
func sampleTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "app")
	mkDir(t, root, 0o750)
	mkFile(t, filepath.Join(root, "a.txt"), "A", 0o644)
	mkFile(t, filepath.Join(root, "bin", "tool"), "T", 0o755|os.ModeSetuid)
	mkDir(t, filepath.Join(root, "empty"), 0o700)
	mkFile(t, filepath.Join(root, "hard1"), "H", 0o644)
	if err := os.Link(filepath.Join(root, "hard1"), filepath.Join(root, "hard2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	return root
}

// sampleEntries are the entries of sampleTree's contents under prefix
// ("" or "dir/").
func sampleEntries(prefix string) []ent {
	return []ent{
		regEnt(prefix+"a.txt", 0o644, "A"),
		dirEnt(prefix+"bin/", 0o755),
		regEnt(prefix+"bin/tool", 0o4755, "T"),
		dirEnt(prefix+"empty/", 0o700),
		regEnt(prefix+"hard1", 0o644, "H"),
		linkEnt(prefix+"hard2", prefix+"hard1", 0o644),
		symEnt(prefix+"link", "a.txt"),
	}
}
