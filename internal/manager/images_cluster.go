package manager

import (
	"context"
	"fmt"
	"io"

	"corral/internal/errdefs"
	imagestore "corral/internal/image/store"
)

// ExportLayer writes layer d as an OCI layer tar regenerated from the
// store's copy (imagestore.ExportLayer): what a cluster node serves to
// another.
func (s Images) ExportLayer(ctx context.Context, d imagestore.Digest, w io.Writer) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	return st.ExportLayer(ctx, d, w)
}

// Adopt stores image want, which another store holds as layers (bottom
// first) and cfg, and points tags at it. The record must hash to want
// (checked before any layer is read); each layer the store lacks is read
// from open and stored under its digest (AddLayerAs: the image's digest
// vouches for the list of layers).
func (s Images) Adopt(ctx context.Context, want imagestore.Digest, layers []imagestore.Digest, cfg imagestore.ImageConfig, tags []string,
	open func(context.Context, imagestore.Digest) (io.ReadCloser, error)) (Image, error) {
	st, err := s.store()
	if err != nil {
		return Image{}, err
	}
	got, err := imagestore.ImageDigest(layers, cfg)
	if err != nil {
		return Image{}, fmt.Errorf("adopting image %s: %w", want, err)
	}
	if got != want {
		return Image{}, fmt.Errorf("%w: adopting image %s: the record received hashes to %s", errdefs.ErrInvalidArgument, want, got)
	}
	for _, d := range layers {
		if _, err := st.Layer(d); err == nil {
			continue
		}
		rc, err := open(ctx, d)
		if err != nil {
			return Image{}, fmt.Errorf("adopting image %s: layer %s: %w", want, d, err)
		}
		_, err = st.AddLayerAs(ctx, rc, d)
		rc.Close()
		if err != nil {
			return Image{}, fmt.Errorf("adopting image %s: %w", want, err)
		}
	}
	img, err := st.PutImage(layers, cfg)
	if err != nil {
		return Image{}, fmt.Errorf("adopting image %s: %w", want, err)
	}
	return s.Tag(img.Digest, tags)
}

// Tag points tags at image d and returns it.
func (s Images) Tag(d imagestore.Digest, tags []string) (Image, error) {
	st, err := s.store()
	if err != nil {
		return Image{}, err
	}
	for _, t := range tags {
		if err := st.Tag(t, d); err != nil {
			return Image{}, fmt.Errorf("tagging %s: %w", t, err)
		}
	}
	return s.Get(string(d))
}

// AdoptLayer stores layer d, which another store regenerated and rc
// reads, under d (AddLayerAs: the cluster node that served it vouches
// for it, as an image's record does for an adopted image's layers).
func (s Images) AdoptLayer(ctx context.Context, d imagestore.Digest, rc io.Reader) (imagestore.Layer, error) {
	st, err := s.store()
	if err != nil {
		return imagestore.Layer{}, err
	}
	return st.AddLayerAs(ctx, rc, d)
}
