package oci

import (
	"context"
	"errors"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"corral/internal/errdefs"
	"corral/internal/image/store"
)

// Bounds on the metadata read from an archive or registry. Real manifests
// and configs are a few KiB; anything near these is hostile or broken.
const (
	maxManifest = 4 << 20
	maxConfig   = 4 << 20
)

// layerSource says how to read a layer's bytes for the store.
type layerSource int

const (
	// compressedLayers hands the store the blob as stored (gzip or plain
	// tar), so the store decompresses it under its own limits.
	compressedLayers layerSource = iota
	// uncompressedLayers hands the store the plain tar: used for docker
	// archives, whose layers are usually plain and where ggcr would
	// otherwise gzip them on the fly.
	uncompressedLayers
)

// storeImage copies img's layers into st, writes its image record and, when
// tag is set, points tag at it. The tag is the last write.
func storeImage(ctx context.Context, st *store.Store, img v1.Image, src layerSource, tag string) (store.Image, error) {
	m, err := img.Manifest()
	if err != nil {
		return store.Image{}, fmt.Errorf("reading manifest: %w", classify(err))
	}
	if n := len(m.Layers); n == 0 || n > store.MaxLayers {
		return store.Image{}, errdefs.Invalid("manifest", "an image has 1 to %d layers, not %d", store.MaxLayers, n)
	}
	if m.Config.Size > maxConfig {
		return store.Image{}, errdefs.Invalid("config", "%d bytes exceeds the %d byte limit", m.Config.Size, maxConfig)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return store.Image{}, fmt.Errorf("reading config: %w", classify(err))
	}
	if err := checkConfig(cf.Config); err != nil {
		return store.Image{}, err
	}
	if len(cf.RootFS.DiffIDs) != len(m.Layers) {
		return store.Image{}, errdefs.Invalid("config", "%d diff_ids for %d layers", len(cf.RootFS.DiffIDs), len(m.Layers))
	}
	layers, err := img.Layers()
	if err != nil {
		return store.Image{}, fmt.Errorf("listing layers: %w", classify(err))
	}
	if len(layers) != len(m.Layers) {
		return store.Image{}, errdefs.Invalid("manifest", "%d layers listed, %d found", len(m.Layers), len(layers))
	}
	digests := make([]store.Digest, 0, len(layers))
	for i, l := range layers {
		d, err := addLayer(ctx, st, l, cf.RootFS.DiffIDs[i], src)
		if err != nil {
			return store.Image{}, fmt.Errorf("layer %d of %d: %w", i+1, len(layers), err)
		}
		digests = append(digests, d)
	}
	out, err := st.PutImage(digests, imageConfig(cf.Config))
	if err != nil {
		return store.Image{}, err
	}
	if tag == "" {
		return out, nil
	}
	if err := st.Tag(tag, out.Digest); err != nil {
		return store.Image{}, err
	}
	out.Tags = appendMissing(out.Tags, tag)
	return out, nil
}

// addLayer stores one layer under diffID. A layer already in the store
// returns without its blob being opened.
func addLayer(ctx context.Context, st *store.Store, l v1.Layer, diffID v1.Hash, src layerSource) (store.Digest, error) {
	d, err := store.ParseDigest(diffID.String())
	if err != nil {
		return "", fmt.Errorf("diff_id: %w", err)
	}
	if _, err := st.Layer(d); err == nil {
		return d, nil
	}
	// The store reads gzip and plain tar only; ggcr decompresses zstd.
	if mt, err := l.MediaType(); err == nil && (mt == types.OCILayerZStd) {
		src = uncompressedLayers
	}
	var rc io.ReadCloser
	if src == uncompressedLayers {
		rc, err = l.Uncompressed()
	} else {
		rc, err = l.Compressed()
	}
	if err != nil {
		return "", fmt.Errorf("opening layer %s: %w", d, classify(err))
	}
	defer rc.Close()
	if _, err := st.AddLayer(ctx, rc, d); err != nil {
		return "", classify(err)
	}
	return d, nil
}

// imageConfig keeps what a sandbox needs from an image's run config: the
// default command is Entrypoint followed by Cmd.
func imageConfig(c v1.Config) store.ImageConfig {
	var cmd []string
	cmd = append(cmd, c.Entrypoint...)
	cmd = append(cmd, c.Cmd...)
	return store.ImageConfig{Env: c.Env, Cmd: cmd, Workdir: c.WorkingDir, User: c.User}
}

func appendMissing(tags []string, tag string) []string {
	for _, t := range tags {
		if t == tag {
			return tags
		}
	}
	return append(tags, tag)
}

// hasKind reports whether err already carries an errdefs kind.
func hasKind(err error) bool {
	return errdefs.Code(err) != "internal" || errors.Is(err, context.Canceled)
}
