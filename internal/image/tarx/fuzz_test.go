package tarx

import (
	"archive/tar"
	"bytes"
	"context"
	"testing"
)

// FuzzExtract feeds arbitrary bytes to Extract: it must not panic, and
// nothing outside dst may change, whatever it returns.
func FuzzExtract(f *testing.F) {
	seeds := [][]ent{
		{dir("./"), dir("etc/"), file("/etc/hostname", "corral"), symlink("lib", "usr/lib"),
			file("bin/sh", "#!"), hardlink("bin/ln", "bin/sh"), file("old/.wh.gone", ""),
			dir("opq/"), file("opq/.wh..wh..opq", "")},
		{file("../../../x", "pwned")},
		{symlink("evil", "../.."), file("evil/sentinel", "pwned")},
		{symlink("evil", "../../sentinel"), file("evil", "inside")},
		{symlink("l", "../.."), file("l/.wh.sentinel", "")},
		{symlink("s", "/etc/passwd"), hardlink("h", "s")},
		{hardlink("h", "../../sentinel")},
		{node("dev/null", tar.TypeChar), node("fifo", tar.TypeFifo)},
		{dir("d/"), file("d/x", "x"), file("d", "y")},
		{{name: "ro/", typ: tar.TypeDir, mode: 0o500}, file("ro/f", "x")},
	}
	for _, s := range seeds {
		layer := mkTar(f, s...)
		f.Add(layer)
		f.Add(gz(f, layer))
	}
	f.Add([]byte{})
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newSandbox(t)
		before := s.snapshot(t)
		lim := Limits{MaxBytes: 1 << 20, MaxEntries: 256, MaxPathLen: 1024}
		Extract(context.Background(), bytes.NewReader(data), s.dst, lim)
		s.checkOutside(t, before)
	})
}
