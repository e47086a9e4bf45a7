package build

import (
	"context"
	"fmt"
	"io"
	"slices"

	"corral/internal/errdefs"
	"corral/internal/image/store"
	"corral/internal/manager"
	"corral/internal/runtime"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// FSSnapshot is a filesystem snapshot: the image, and what a layer could
// not hold.
type FSSnapshot struct {
	Image store.Image
	// LeftOut names the device nodes, FIFOs and sockets the sandbox had
	// made that the image does not have (at most 20; LeftOutCount counts
	// them all).
	LeftOut      []string
	LeftOutCount int
}

// SnapshotFS turns a running sandbox's writable layer into an image: the
// sandbox's image (the base as a layer, for sandboxes of the base) with
// one more layer holding what the sandbox changed, and the image's
// configuration. The sandbox keeps running; what its processes write
// during the export may or may not be included. The image is tagged tag
// when set. Entries a layer cannot hold are left out and listed.
func (b *Builder) SnapshotFS(ctx context.Context, sandboxID, tag string) (FSSnapshot, error) {
	img, out, err := b.snapshotFS(ctx, sandboxID, tag)
	if err != nil {
		return FSSnapshot{}, err
	}
	return FSSnapshot{Image: img, LeftOut: out.names, LeftOutCount: out.count}, nil
}

func (b *Builder) snapshotFS(ctx context.Context, sandboxID, tag string) (store.Image, leftOut, error) {
	if tag != "" {
		if _, err := store.ParseRef(tag); err != nil {
			return store.Image{}, leftOut{}, errdefs.Invalid("tag", "%v", err)
		}
	}
	sb, err := b.cfg.Manager.Get(ctx, sandboxID)
	if err != nil {
		return store.Image{}, leftOut{}, err
	}
	export := func(w io.Writer) (runtime.ExportStats, error) {
		return b.cfg.Manager.Files().ExportChanges(ctx, sandboxID, w)
	}
	img, out, err := b.commit(ctx, sb.Spec, export)
	if err != nil {
		return store.Image{}, leftOut{}, err
	}
	b.log.Info("filesystem snapshot", "op", "snapshot", "sandbox", sandboxID, "image", img.Digest, "tag", tag, "left_out", out.count)
	if tag == "" {
		return img, out, nil
	}
	if err := b.cfg.Store.Tag(tag, img.Digest); err != nil {
		return store.Image{}, leftOut{}, err
	}
	img, err = b.cfg.Store.Resolve(string(img.Digest))
	return img, out, err
}

// CommitFS is manager.CommitFS: the image of a sandbox of spec whose
// changes export writes (a filesystem-only pause), untagged.
func (b *Builder) CommitFS(ctx context.Context, spec sandbox.Spec, export manager.Export) (store.Image, error) {
	img, _, err := b.commit(ctx, spec, export)
	return img, err
}

// commit stores what export writes as a layer on the image of a sandbox
// of spec (for the base, the base directory's cached layer), with that
// image's configuration: the image, and what the layer left out.
func (b *Builder) commit(ctx context.Context, spec sandbox.Spec, export manager.Export) (store.Image, leftOut, error) {
	r := &run{b: b, req: Request{Emit: func(apiv1.BuildEvent) {}}}
	var parent state
	if spec.ImageDigest == "" {
		// The base image is a directory: its layer is the same one a
		// debian:bookworm build starts from (cached).
		base := apiv1.BuildBase{Debian: supportedSuite}
		r.p = &plan{spec: apiv1.BuildSpec{Base: base}}
		var err error
		if parent, err = r.debianBase(ctx, base); err != nil {
			return store.Image{}, leftOut{}, fmt.Errorf("the base image as a layer: %w", err)
		}
	} else {
		img, err := b.cfg.Store.Resolve(spec.ImageDigest)
		if err != nil {
			return store.Image{}, leftOut{}, fmt.Errorf("the sandbox's image: %w", err)
		}
		parent = state{layers: img.Layers, config: img.Config}
	}
	layer, out, err := r.exportWith(ctx, export)
	if err != nil {
		return store.Image{}, leftOut{}, err
	}
	layers := parent.layers
	if layer != "" && !slices.Contains(layers, layer) {
		layers = append(slices.Clip(layers), layer)
	}
	if len(layers) > store.MaxLayers {
		return store.Image{}, leftOut{}, fmt.Errorf("%w: the image would have %d layers (at most %d)", errdefs.ErrResourceExhausted, len(layers), store.MaxLayers)
	}
	img, err := b.cfg.Store.PutImage(layers, parent.config)
	return img, out, err
}
