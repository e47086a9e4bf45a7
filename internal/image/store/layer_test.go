package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"path/filepath"
	"sync"
	"testing"

	"corral/internal/errdefs"
)

func TestAddLayerFindsFiles(t *testing.T) {
	s := newStore(t)
	raw := makeTar(t, entry{"etc/", ""}, entry{"etc/hello", "world"}, entry{"bin/", ""})
	l, err := s.AddLayer(context.Background(), bytes.NewReader(raw), "")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if want := Digest("sha256:" + hex.EncodeToString(sum[:])); l.Digest != want {
		t.Fatalf("digest %s, want the sha256 of the tar %s", l.Digest, want)
	}
	if got := readFile(t, s.layerDir(l.Digest), "fs", "etc", "hello"); got != "world" {
		t.Fatalf("etc/hello = %q", got)
	}
	if l.Size != 5 || l.Entries != 3 || l.Created.IsZero() {
		t.Fatalf("layer = %+v", l)
	}
	back, err := s.Layer(l.Digest)
	if err != nil || back.Digest != l.Digest || back.Size != l.Size {
		t.Fatalf("Layer() = %+v, %v", back, err)
	}
	requireEmptyTmp(t, s)
}

func TestAddLayerSameContentOnce(t *testing.T) {
	s := newStore(t)
	a := addLayer(t, s, entry{"a", "1"})
	b := addLayer(t, s, entry{"a", "1"})
	if a.Digest != b.Digest {
		t.Fatalf("digests differ: %s %s", a.Digest, b.Digest)
	}
	if n := names(t, s.path("layers", "sha256")); len(n) != 1 {
		t.Fatalf("layers: %v", n)
	}
	requireEmptyTmp(t, s)
}

func TestAddLayerGzipSameDigest(t *testing.T) {
	s := newStore(t)
	raw := makeTar(t, entry{"x", "compress me compress me compress me"})
	plain, err := s.AddLayer(context.Background(), bytes.NewReader(raw), "")
	if err != nil {
		t.Fatal(err)
	}
	s2 := newStore(t)
	gz, err := s2.AddLayer(context.Background(), bytes.NewReader(gzipped(t, raw)), "")
	if err != nil {
		t.Fatal(err)
	}
	if plain.Digest != gz.Digest {
		t.Fatalf("plain %s, gzip %s", plain.Digest, gz.Digest)
	}
}

func TestAddLayerWrongExpectedDigest(t *testing.T) {
	s := newStore(t)
	other := addLayer(t, s, entry{"other", ""})
	wrong := Digest("sha256:" + string(bytes.Repeat([]byte("ab"), 32)))
	_, err := s.AddLayer(context.Background(), bytes.NewReader(makeTar(t, entry{"a", "1"})), wrong)
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("err = %v, want invalid argument", err)
	}
	if n := names(t, s.path("layers", "sha256")); len(n) != 1 || n[0] != other.Digest.Hex() {
		t.Fatalf("layers: %v", n)
	}
	requireEmptyTmp(t, s)
	if _, err := s.AddLayer(context.Background(), bytes.NewReader(nil), "sha256:nothex"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("bad expected digest: err = %v", err)
	}
}

// failingReader fails if read: the layer must come from the store.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("read when the layer exists") }

func TestAddLayerExpectedDigestSkipsWork(t *testing.T) {
	s := newStore(t)
	l := addLayer(t, s, entry{"a", "1"})
	got, err := s.AddLayer(context.Background(), failingReader{}, l.Digest)
	if err != nil || got.Digest != l.Digest {
		t.Fatalf("AddLayer = %+v, %v", got, err)
	}
}

// A failed extraction leaves nothing behind, and says whose fault it was:
// a malformed layer (plain or gzip) is invalid, a failing source is not.
func TestAddLayerFailedExtractionLeavesNothing(t *testing.T) {
	raw := makeTar(t, entry{"a", "1"}, entry{"b", "some more content"})
	gz := gzipped(t, raw)
	badCRC := bytes.Clone(gz)
	badCRC[len(badCRC)-8] ^= 0xff // the trailer's CRC-32
	tests := []struct {
		name    string
		r       io.Reader
		invalid bool
	}{
		{"truncated", bytes.NewReader(raw[:1024+512+5]), true},
		{"escape", bytes.NewReader(makeTar(t, entry{"ok", "1"}, entry{"../../escape", "x"})), true},
		{"reader error", io.MultiReader(bytes.NewReader(raw[:1024]), failingReader{}), false},
		{"bad gzip", bytes.NewReader([]byte{0x1f, 0x8b, 0, 0, 0}), true},
		{"gzip checksum", bytes.NewReader(badCRC), true},
		{"gzip cut short", bytes.NewReader(gz[:len(gz)/2]), true},
		{"gzip trailing garbage", bytes.NewReader(append(bytes.Clone(gz), "garbage"...)), true},
		{"reader error under gzip", io.MultiReader(bytes.NewReader(gz[:len(gz)/2]), failingReader{}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			_, err := s.AddLayer(context.Background(), tt.r, "")
			if err == nil {
				t.Fatal("AddLayer succeeded")
			}
			if errors.Is(err, errdefs.ErrInvalidArgument) != tt.invalid {
				t.Errorf("err = %v (%s); want invalid argument: %v", err, errdefs.Code(err), tt.invalid)
			}
			if n := names(t, s.path("layers", "sha256")); len(n) != 0 {
				t.Fatalf("layers: %v", n)
			}
			requireEmptyTmp(t, s)
		})
	}
}

func TestAddLayerGzipBomb(t *testing.T) {
	s := newStore(t)
	big := makeTar(t, entry{"zeros", string(make([]byte, 8<<20))})
	_, err := s.AddLayer(context.Background(), bytes.NewReader(gzipped(t, big)), "")
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("err = %v, want the expansion refused", err)
	}
	requireEmptyTmp(t, s)
}

func TestAddLayerConcurrent(t *testing.T) {
	for _, withExpect := range []bool{false, true} {
		t.Run(map[bool]string{false: "no digest", true: "expected digest"}[withExpect], func(t *testing.T) {
			s := newStore(t)
			raw := makeTar(t, entry{"dir/", ""}, entry{"dir/f", "same"})
			var expect Digest
			if withExpect {
				sum := sha256.Sum256(raw)
				expect = Digest("sha256:" + hex.EncodeToString(sum[:]))
			}
			var wg sync.WaitGroup
			got := make([]Layer, 8)
			errs := make([]error, 8)
			for i := range 8 {
				wg.Go(func() {
					got[i], errs[i] = s.AddLayer(context.Background(), bytes.NewReader(raw), expect)
				})
			}
			wg.Wait()
			for i := range 8 {
				if errs[i] != nil || got[i].Digest != got[0].Digest {
					t.Fatalf("call %d: %+v, %v", i, got[i], errs[i])
				}
			}
			if n := names(t, s.path("layers", "sha256")); len(n) != 1 {
				t.Fatalf("layers: %v", n)
			}
			if got := readFile(t, s.layerDir(got[0].Digest), "fs", "dir", "f"); got != "same" {
				t.Fatalf("dir/f = %q", got)
			}
			requireEmptyTmp(t, s)
		})
	}
}

func TestCorruptLayerRecord(t *testing.T) {
	s := newStore(t)
	l := addLayer(t, s, entry{"a", "1"})
	p := filepath.Join(s.layerDir(l.Digest), "layer.json")
	if err := writeFileAtomic(p, []byte(`{"schema":1,"digest":"sha256:`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := s.Layer(l.Digest)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(p)) {
		t.Fatalf("err = %v, want one naming %s", err, p)
	}
}
