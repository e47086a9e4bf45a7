package store

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// entry is one tar entry of a test layer: a name ending in "/" is a
// directory.
type entry struct {
	name, body string
}

func makeTar(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(1700000000, 0)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, ModTime: mtime, Typeflag: tar.TypeReg, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.name[len(e.name)-1] == '/' {
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipped(t *testing.T, b []byte) []byte {
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

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newStore opens a store in a temporary directory with no prune grace.
func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	s.grace = 0
	return s
}

func addLayer(t *testing.T, s *Store, entries ...entry) Layer {
	t.Helper()
	l, err := s.AddLayer(context.Background(), bytes.NewReader(makeTar(t, entries...)), "")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func requireEmptyTmp(t *testing.T, s *Store) {
	t.Helper()
	if n := names(t, s.path("tmp")); len(n) != 0 {
		t.Fatalf("tmp holds leftovers: %v", n)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: overlayfs whiteouts (mknod) and overlay mounts")
	}
}

func readFile(t *testing.T, elem ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(elem...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
