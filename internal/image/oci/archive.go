package oci

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"corral/internal/errdefs"
	"corral/internal/hostpath"
	"corral/internal/image/store"
)

// Bounds on an archive's table of contents.
const (
	maxEntries  = 1 << 14 // tar entries in an archive
	maxIndexLen = 4 << 20 // index.json / manifest.json
	maxDepth    = 4       // nested OCI indexes
)

// Import loads a docker-archive tarball ("docker save") or an OCI image
// layout (a directory, or a tar of one) from path into st, tags it ref
// (validated with store.ParseRef; "" leaves it untagged) and returns the
// stored image.
//
// A layout or archive holding several images is refused unless exactly one
// of them is linux/amd64. A tar of a layout is unpacked under the store's
// tmp/ directory for the duration of the import.
//
// Errors name neither path nor the store's directories (the archive is
// usually an upload the daemon saved, and the caller must not learn the
// host's layout): files of a layout are named by their place in it.
func Import(ctx context.Context, st *store.Store, path string, ref string) (store.Image, error) {
	img, err := importImage(ctx, st, path, ref)
	if err != nil {
		return store.Image{}, fmt.Errorf("importing the archive: %w", hostpath.NewRedactor(path, st.Root()).Error(err))
	}
	return img, nil
}

func importImage(ctx context.Context, st *store.Store, p string, ref string) (store.Image, error) {
	var tag string
	if ref != "" {
		var err error
		if tag, err = store.ParseRef(ref); err != nil {
			return store.Image{}, err
		}
	}
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return store.Image{}, fmt.Errorf("%w: %w", errdefs.ErrNotFound, err)
		}
		return store.Image{}, err
	}
	if fi.IsDir() {
		return importLayout(ctx, st, p, tag)
	}
	if !fi.Mode().IsRegular() {
		return store.Image{}, errdefs.Invalid("path", "not a regular file or directory")
	}
	toc, err := scanTar(p)
	if err != nil {
		return store.Image{}, err
	}
	switch {
	case toc.has("oci-layout"):
		dir, err := os.MkdirTemp(filepath.Join(st.Root(), "tmp"), "oci-import-")
		if err != nil {
			return store.Image{}, err
		}
		defer os.RemoveAll(dir)
		if err := unpackLayout(ctx, p, dir); err != nil {
			return store.Image{}, err
		}
		return importLayout(ctx, st, dir, tag)
	case toc.has("manifest.json"):
		return importDockerArchive(ctx, st, p, toc, tag)
	}
	return store.Image{}, errdefs.Invalid("archive", "neither a docker archive (manifest.json) nor an OCI layout (oci-layout)")
}

// toc is an archive's regular files and their sizes, by cleaned name.
type toc struct {
	sizes map[string]int64
}

func (t toc) has(name string) bool { _, ok := t.sizes[name]; return ok }

// cleanName normalises a tar entry name ("./a//b" -> "a/b").
func cleanName(n string) string {
	return path.Clean("/" + n)[1:]
}

// scanTar lists the regular files of the tar at p, reading headers only.
func scanTar(p string) (toc, error) {
	f, err := os.Open(p)
	if err != nil {
		return toc{}, err
	}
	defer f.Close()
	t := toc{sizes: map[string]int64{}}
	tr := tar.NewReader(f)
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return toc{}, errdefs.Invalid("archive", "not a tar: %v", err)
		}
		if n >= maxEntries {
			return toc{}, errdefs.Invalid("archive", "more than %d entries", maxEntries)
		}
		if hdr.Typeflag == tar.TypeReg {
			t.sizes[cleanName(hdr.Name)] = hdr.Size
		}
	}
	if len(t.sizes) == 0 {
		return toc{}, errdefs.Invalid("archive", "no files")
	}
	return t, nil
}

// dockerManifest is one entry of a docker archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func importDockerArchive(ctx context.Context, st *store.Store, p string, t toc, tag string) (store.Image, error) {
	if t.sizes["manifest.json"] > maxIndexLen {
		return store.Image{}, errdefs.Invalid("manifest.json", "larger than %d bytes", maxIndexLen)
	}
	raw, err := readTarFile(p, "manifest.json", maxIndexLen)
	if err != nil {
		return store.Image{}, err
	}
	var ms []dockerManifest
	if err := json.Unmarshal(raw, &ms); err != nil {
		return store.Image{}, errdefs.Invalid("manifest.json", "%v", err)
	}
	if len(ms) != 1 {
		return store.Image{}, errdefs.Invalid("manifest.json", "holds %d images; import takes one", len(ms))
	}
	m := ms[0]
	if n := len(m.Layers); n == 0 || n > store.MaxLayers {
		return store.Image{}, errdefs.Invalid("manifest.json", "an image has 1 to %d layers, not %d", store.MaxLayers, n)
	}
	size, ok := t.sizes[cleanName(m.Config)]
	if !ok {
		return store.Image{}, errdefs.Invalid("manifest.json", "config %q is not in the archive", truncate(m.Config))
	}
	if size > maxConfig {
		return store.Image{}, errdefs.Invalid("config", "%d bytes exceeds the %d byte limit", size, maxConfig)
	}
	for _, l := range m.Layers {
		if !t.has(cleanName(l)) {
			return store.Image{}, errdefs.Invalid("manifest.json", "layer %q is not in the archive", truncate(l))
		}
	}
	img, err := tarball.ImageFromPath(p, nil)
	if err != nil {
		return store.Image{}, errdefs.Invalid("archive", "%v", err)
	}
	return storeImage(ctx, st, archiveImage{Image: img}, uncompressedLayers, tag)
}

// readTarFile returns the contents of the regular file name in the tar at p.
func readTarFile(p, name string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return nil, errdefs.Invalid("archive", "reading %s: %v", name, err)
		}
		if hdr.Typeflag == tar.TypeReg && cleanName(hdr.Name) == name {
			b, err := io.ReadAll(io.LimitReader(tr, limit+1))
			if err != nil {
				return nil, errdefs.Invalid("archive", "reading %s: %v", name, err)
			}
			if int64(len(b)) > limit {
				return nil, errdefs.Invalid(name, "larger than %d bytes", limit)
			}
			return b, nil
		}
	}
}

// layoutName matches the files of an OCI layout that Import reads.
var layoutName = regexp.MustCompile(`^(oci-layout|index\.json|blobs/sha256/[0-9a-f]{64})$`)

// unpackLayout copies the layout files of the tar at p into dir. Only
// oci-layout, index.json and blobs/sha256/<hex> are written, at paths built
// here, so a hostile name cannot escape dir; everything else is skipped.
func unpackLayout(ctx context.Context, p, dir string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
		return err
	}
	tr := tar.NewReader(f)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errdefs.Invalid("archive", "%v", err)
		}
		name := cleanName(hdr.Name)
		if hdr.Typeflag != tar.TypeReg || !layoutName.MatchString(name) {
			continue
		}
		if err := writeNew(filepath.Join(dir, filepath.FromSlash(name)), tr); err != nil {
			return err
		}
	}
}

func writeNew(dst string, r io.Reader) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errdefs.Invalid("archive", "%s appears twice", filepath.Base(dst))
		}
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return errdefs.Invalid("archive", "%v", err)
	}
	return out.Close()
}

// importLayout imports the one image of the OCI layout in dir. Its
// errors name the layout's files relative to dir.
func importLayout(ctx context.Context, st *store.Store, dir, tag string) (store.Image, error) {
	img, err := importLayoutFiles(ctx, st, dir, tag)
	return img, hostpath.Relative(err, dir)
}

func importLayoutFiles(ctx context.Context, st *store.Store, dir, tag string) (store.Image, error) {
	for _, f := range []string{"oci-layout", "index.json"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if errors.Is(err, fs.ErrNotExist) {
			return store.Image{}, errdefs.Invalid("layout", "%s is missing", f)
		}
		if err != nil {
			return store.Image{}, errdefs.Invalid("layout", "%s: %v", f, err)
		}
		if fi.Size() > maxIndexLen {
			return store.Image{}, errdefs.Invalid("layout", "%s is larger than %d bytes", f, maxIndexLen)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return store.Image{}, errdefs.Invalid("layout", "%v", err)
	}
	img, err := pickImage(idx, 0)
	if err != nil {
		return store.Image{}, err
	}
	return storeImage(ctx, st, archiveImage{Image: img, dir: dir}, compressedLayers, tag)
}

// pickImage finds the image in idx: the only one, or the only linux/amd64
// one, descending into nested indexes.
func pickImage(idx v1.ImageIndex, depth int) (v1.Image, error) {
	if depth > maxDepth {
		return nil, errdefs.Invalid("layout", "indexes nested deeper than %d", maxDepth)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, errdefs.Invalid("layout", "%v", err)
	}
	var images []v1.Image
	var plats []*v1.Platform
	for _, d := range im.Manifests {
		if d.Size > maxManifest {
			return nil, errdefs.Invalid("layout", "manifest %s is larger than %d bytes", d.Digest, maxManifest)
		}
		switch {
		case d.MediaType.IsImage():
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, errdefs.Invalid("layout", "%v", err)
			}
			images, plats = append(images, img), append(plats, d.Platform)
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, errdefs.Invalid("layout", "%v", err)
			}
			img, err := pickImage(child, depth+1)
			if err != nil {
				return nil, err
			}
			images, plats = append(images, img), append(plats, d.Platform)
		}
		if len(images) > store.MaxLayers {
			return nil, errdefs.Invalid("layout", "too many images")
		}
	}
	if len(images) == 1 {
		return images[0], nil
	}
	want := v1.Platform{OS: "linux", Architecture: "amd64"}
	var match []v1.Image
	for i, p := range plats {
		if p != nil && p.OS == want.OS && p.Architecture == want.Architecture {
			match = append(match, images[i])
		}
	}
	if len(match) == 1 {
		return match[0], nil
	}
	return nil, errdefs.Invalid("layout", "holds %d images (%d linux/amd64); import takes one", len(images), len(match))
}

// archiveImage marks errors reading a local archive as invalid: a blob that
// is missing or fails to parse is a malformed archive, not a server fault.
// For a layout (dir set) it also checks the config blob's size on disk,
// which a hostile layout may understate in its manifest.
type archiveImage struct {
	v1.Image
	dir string
}

func (a archiveImage) Manifest() (*v1.Manifest, error) {
	m, err := a.Image.Manifest()
	return m, invalid(err)
}

func (a archiveImage) ConfigFile() (*v1.ConfigFile, error) {
	if a.dir != "" {
		h, err := a.Image.ConfigName()
		if err != nil {
			return nil, invalid(err)
		}
		fi, err := os.Stat(filepath.Join(a.dir, "blobs", h.Algorithm, h.Hex))
		if err != nil {
			return nil, invalid(err)
		}
		if fi.Size() > maxConfig {
			return nil, errdefs.Invalid("config", "%d bytes exceeds the %d byte limit", fi.Size(), maxConfig)
		}
	}
	c, err := a.Image.ConfigFile()
	return c, invalid(err)
}

func (a archiveImage) Layers() ([]v1.Layer, error) {
	ls, err := a.Image.Layers()
	if err != nil {
		return nil, invalid(err)
	}
	out := make([]v1.Layer, len(ls))
	for i, l := range ls {
		out[i] = archiveLayer{l}
	}
	return out, nil
}

// archiveLayer marks errors reading a layer's bytes as invalid too: a blob
// that is cut short or does not decompress (ggcr gunzips a docker
// archive's layers before the store sees them) is a malformed archive.
type archiveLayer struct {
	v1.Layer
}

func (l archiveLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, invalid(err)
	}
	return invalidReader{rc}, nil
}

func (l archiveLayer) Uncompressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Uncompressed()
	if err != nil {
		return nil, invalid(err)
	}
	return invalidReader{rc}, nil
}

// invalidReader marks its reader's failures, io.EOF aside, as invalid.
type invalidReader struct {
	io.ReadCloser
}

func (r invalidReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = invalid(err)
	}
	return n, err
}

func invalid(err error) error {
	if err == nil || hasKind(err) {
		return err
	}
	return fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
}
