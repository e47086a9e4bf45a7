package manager

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"corral/internal/errdefs"
	imagestore "corral/internal/image/store"
)

// Adopt takes an image another store exported, layer by layer, when its
// record hashes to the digest asked for, and refuses a tampered record
// before reading any layer.
func TestAdoptImage(t *testing.T) {
	ctx := context.Background()
	e := newEnvWith(t, func(c *Config) {
		st, err := imagestore.Open(filepath.Join(c.StateDir, "images"), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		c.Images = st
	})
	src, err := imagestore.Open(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l, err := src.AddLayer(ctx, bytes.NewReader(tarOf(t, "hello.txt", "hi")), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := imagestore.ImageConfig{Env: []string{"A=1"}}
	img, err := src.PutImage([]imagestore.Digest{l.Digest}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	opened := 0
	open := func(ctx context.Context, d imagestore.Digest) (io.ReadCloser, error) {
		opened++
		var buf bytes.Buffer
		if err := src.ExportLayer(ctx, d, &buf); err != nil {
			return nil, err
		}
		return io.NopCloser(&buf), nil
	}
	images := e.m.Images()
	tampered := imagestore.ImageConfig{Env: []string{"A=2"}}
	if _, err := images.Adopt(ctx, img.Digest, img.Layers, tampered, nil, open); !errors.Is(err, errdefs.ErrInvalidArgument) || opened != 0 {
		t.Fatalf("adopting a tampered record: %v, %d layers read", err, opened)
	}
	got, err := images.Adopt(ctx, img.Digest, img.Layers, cfg, []string{"app:1"}, open)
	if err != nil || got.Digest != img.Digest || opened != 1 || len(got.Tags) != 1 || got.Tags[0] != "app:1" {
		t.Fatalf("adopted %+v, %v (%d layers read)", got, err, opened)
	}
	// Held now: a second adoption reads no layer.
	if _, err := images.Adopt(ctx, img.Digest, img.Layers, cfg, nil, open); err != nil || opened != 1 {
		t.Fatalf("adopting again: %v, %d layers read", err, opened)
	}
}

// tarOf is a tar of one regular file.
func tarOf(t *testing.T, name, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(tw, body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
