package manager

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"corral/internal/errdefs"
	"corral/internal/image/oci"
	imagestore "corral/internal/image/store"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// baseImage is the image name of the Debian base every daemon has.
const baseImage = "base"

// prepareImage resolves the sandbox's image, leases it for the sandbox's
// life (released by the teardown) and fills in the runtime's root
// filesystem and the image's defaults: its env under the sandbox's own,
// and its workdir and user where the spec names none.
func (m *Manager) prepareImage(h *handle.Handle, params *runtime.StartParams) error {
	spec := h.Record().Spec
	if spec.Image == baseImage {
		params.RootFS = m.cfg.BaseRootFS
		return nil
	}
	if m.cfg.Images == nil {
		return fmt.Errorf("%w: image %q: this daemon has no image store", errdefs.ErrNotFound, spec.Image)
	}
	img, err := m.cfg.Images.Resolve(spec.Image)
	if err != nil {
		return fmt.Errorf("image %q: %w", spec.Image, err)
	}
	if err := m.cfg.Images.Lease(h.ID(), img.Digest); err != nil {
		return fmt.Errorf("leasing image %s: %w", img.Digest, err)
	}
	root, err := m.cfg.Images.RootFS(img.Digest)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Digest, err)
	}
	params.RootFS = root
	params.Env = sandbox.MergeEnv(img.Config.Env, params.Env)
	h.Edit(func(s *sandbox.Sandbox) {
		s.Spec.ImageDigest = string(img.Digest)
		s.Spec.Workdir = or(s.Spec.Workdir, img.Config.Workdir)
		s.Spec.User = or(s.Spec.User, img.Config.User)
	})
	return nil
}

// or is a, or b when a is empty.
func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// imageRoot is the root filesystem directory a sandbox's image gives it.
func (m *Manager) imageRoot(spec sandbox.Spec) (string, error) {
	if spec.Image == baseImage {
		return m.cfg.BaseRootFS, nil
	}
	if m.cfg.Images == nil || spec.ImageDigest == "" {
		return "", fmt.Errorf("%w: image %q is not in the store", errdefs.ErrFailedPrecondition, spec.Image)
	}
	return m.cfg.Images.RootFS(imagestore.Digest(spec.ImageDigest))
}

// Images is the image service: the image store as the API sees it, with
// what only the manager knows (which images live sandboxes use, the
// runtimes' caches derived from images).
type Images struct{ m *Manager }

// Image is an image with its size and whether a live sandbox uses it.
type Image struct {
	imagestore.Image
	Size  int64
	InUse bool
}

// store returns the image store, or not_supported when the daemon has
// none.
func (s Images) store() (*imagestore.Store, error) {
	if s.m.cfg.Images == nil {
		return nil, fmt.Errorf("%w: this daemon has no image store", errdefs.ErrNotSupported)
	}
	return s.m.cfg.Images, nil
}

func (s Images) describe(st *imagestore.Store, img imagestore.Image, inUse map[string]bool) Image {
	out := Image{Image: img, InUse: inUse[string(img.Digest)]}
	for _, d := range img.Layers {
		if l, err := st.Layer(d); err == nil {
			out.Size += l.Size
		}
	}
	return out
}

// inUse is the set of image digests live sandboxes lease.
func (s Images) inUse() map[string]bool {
	s.m.mu.Lock()
	hs := make([]*handle.Handle, 0, len(s.m.handles))
	for _, h := range s.m.handles {
		hs = append(hs, h)
	}
	s.m.mu.Unlock()
	used := map[string]bool{}
	for _, h := range hs {
		if d := h.Record().Spec.ImageDigest; d != "" {
			used[d] = true
		}
	}
	return used
}

// List returns every image.
func (s Images) List() ([]Image, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	imgs, err := st.Images()
	if err != nil {
		return nil, err
	}
	out := make([]Image, 0, len(imgs))
	used := s.inUse()
	for _, img := range imgs {
		out = append(out, s.describe(st, img, used))
	}
	return out, nil
}

// Get returns the image ref names (name:tag or digest).
func (s Images) Get(ref string) (Image, error) {
	st, err := s.store()
	if err != nil {
		return Image{}, err
	}
	img, err := st.Resolve(ref)
	if err != nil {
		return Image{}, err
	}
	return s.describe(st, img, s.inUse()), nil
}

// Remove untags (or, by digest, removes) an image.
func (s Images) Remove(ref string) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	return st.RemoveImage(ref)
}

// Prune removes unused images and layers, then what the runtimes derived
// from images that are gone; the report's Bytes counts both.
func (s Images) Prune(ctx context.Context) (imagestore.PruneReport, error) {
	st, err := s.store()
	if err != nil {
		return imagestore.PruneReport{}, err
	}
	rep, err := st.Prune(ctx)
	if err != nil {
		return rep, err
	}
	rep.Bytes += s.m.pruneRuntimeCaches()
	return rep, nil
}

// pruneRuntimeCaches drops what runtimes derived from images that are gone,
// returning the bytes freed.
func (m *Manager) pruneRuntimeCaches() int64 {
	var freed int64
	for name, rt := range m.cfg.Runtimes {
		p, ok := rt.(runtime.CachePruner)
		if !ok {
			continue
		}
		n, err := p.PruneCaches()
		if err != nil {
			m.log.Warn("pruning runtime caches", "runtime", name, "err", err)
		}
		freed += n
	}
	return freed
}

// Import reads a docker-save or OCI layout archive (at most limit bytes)
// from r and imports it, tagged ref if not empty.
func (s Images) Import(ctx context.Context, r io.Reader, limit int64, ref string) (Image, error) {
	st, err := s.store()
	if err != nil {
		return Image{}, err
	}
	if ref != "" {
		if _, err := imagestore.ParseRef(ref); err != nil {
			return Image{}, errdefs.Invalid("ref", "%v", err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Join(st.Root(), "tmp"), "import-*.tar")
	if err != nil {
		return Image{}, err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(r, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return Image{}, errdefs.Invalid("body", "reading the archive: %v", err)
	case n > limit:
		return Image{}, errdefs.Invalid("body", "the archive is larger than %d bytes", limit)
	}
	img, err := oci.Import(ctx, st, tmp.Name(), ref)
	if err != nil {
		return Image{}, err
	}
	return s.describe(st, img, s.inUse()), nil
}

// Pull fetches an image from a registry.
func (s Images) Pull(ctx context.Context, ref string, opts oci.PullOptions) (Image, error) {
	st, err := s.store()
	if err != nil {
		return Image{}, err
	}
	img, err := oci.Pull(ctx, st, ref, opts)
	if err != nil {
		return Image{}, err
	}
	return s.describe(st, img, s.inUse()), nil
}

// AddLayer stores a layer tar (plain or gzip): a build's copy step.
func (s Images) AddLayer(ctx context.Context, r io.Reader) (imagestore.Layer, error) {
	st, err := s.store()
	if err != nil {
		return imagestore.Layer{}, err
	}
	return st.AddLayer(ctx, r, "")
}

// Layer describes a stored layer.
func (s Images) Layer(d imagestore.Digest) (imagestore.Layer, error) {
	st, err := s.store()
	if err != nil {
		return imagestore.Layer{}, err
	}
	return st.Layer(d)
}
