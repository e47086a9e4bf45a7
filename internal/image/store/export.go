package store

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"corral/internal/image/dirtar"
	"corral/internal/image/overlaytar"
)

// ExportLayer writes layer d to w as an OCI layer tar, regenerated from
// its extracted files: overlayfs whiteouts and opaque directories become
// ".wh." markers again, owners, modes, times and the kept xattrs stay.
// The bytes are not the original tar's, so they do not hash to d; another
// store takes them with AddLayerAs. A cluster node serves its layers to
// other nodes this way.
func (s *Store) ExportLayer(ctx context.Context, d Digest, w io.Writer) error {
	if _, err := s.Layer(d); err != nil {
		return fmt.Errorf("exporting layer: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := dirtar.Write(pw, filepath.Join(s.layerDir(d), "fs"), "/", dirtar.Options{Overlay: true})
		pw.CloseWithError(err)
	}()
	stop := context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
	defer stop()
	_, err := overlaytar.Convert(pr, w, overlaytar.Options{})
	pr.CloseWithError(io.ErrClosedPipe) // lets the writer end if Convert stopped early
	if err != nil {
		return fmt.Errorf("exporting layer %s: %w", d, err)
	}
	return nil
}

// ImageDigest is the digest an image of layers and cfg has: what PutImage
// would record it as. A store receiving an image checks it against the
// digest it asked for before fetching any layer.
func ImageDigest(layers []Digest, cfg ImageConfig) (Digest, error) {
	cfg, err := normalizeConfig(cfg)
	if err != nil {
		return "", err
	}
	return specDigest(layers, cfg)
}
