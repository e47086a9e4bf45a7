package store

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestExportLayerRoundTrip: a layer exported from one store and added to
// another as its digest has the same files, whiteouts and opaque
// directories (which need root to extract).
func TestExportLayerRoundTrip(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("extracting whiteouts needs root")
	}
	ctx := context.Background()
	a, b := newStore(t), newStore(t)
	l := addLayer(t, a, entry{"etc/", ""}, entry{"etc/motd", "hello"}, entry{"etc/.wh.gone", ""},
		entry{"opt/", ""}, entry{"opt/.wh..wh..opq", ""}, entry{"opt/x", "x"})
	var buf bytes.Buffer
	if err := a.ExportLayer(ctx, l.Digest, &buf); err != nil {
		t.Fatal(err)
	}
	got, err := b.AddLayerAs(ctx, &buf, l.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != l.Digest || got.Entries == 0 {
		t.Fatalf("added %+v, want digest %s", got, l.Digest)
	}
	fs := filepath.Join(b.layerDir(l.Digest), "fs")
	if body, err := os.ReadFile(filepath.Join(fs, "etc/motd")); err != nil || string(body) != "hello" {
		t.Fatalf("etc/motd: %q, %v", body, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(fs, "etc/gone"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Fatalf("etc/gone is not a whiteout: mode %o rdev %d, %v", st.Mode, st.Rdev, err)
	}
	if v, err := getxattr(filepath.Join(fs, "opt"), "trusted.overlay.opaque"); err != nil || v != "y" {
		t.Fatalf("opt is not opaque: %q, %v", v, err)
	}
	// A layer already there is not read again; an unknown one is refused.
	if _, err := b.AddLayerAs(ctx, bytes.NewReader(nil), l.Digest); err != nil {
		t.Fatal(err)
	}
	if err := a.ExportLayer(ctx, Digest("sha256:"+string(bytes.Repeat([]byte("0"), 64))), &buf); err == nil {
		t.Fatal("exported a layer the store does not hold")
	}
}
