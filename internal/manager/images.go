package manager

import (
	"context"
	"fmt"

	"corral/internal/cleanup"
	"corral/internal/errdefs"
	imagestore "corral/internal/image/store"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// baseImage is the image name of the Debian base every daemon has.
const baseImage = "base"

// prepareImage resolves the sandbox's image, leases it for the sandbox's
// life (undone by c) and fills in the runtime's root filesystem and the
// image's defaults (env under the sandbox's own, workdir, user).
func (m *Manager) prepareImage(c *cleanup.Cleanup, l *live, params *runtime.StartParams) error {
	sb := l.snapshot()
	if sb.Spec.Image == baseImage {
		params.RootFS = m.cfg.BaseRootFS
		return nil
	}
	if m.cfg.Images == nil {
		return fmt.Errorf("%w: image %q: this daemon has no image store", errdefs.ErrNotFound, sb.Spec.Image)
	}
	img, err := m.cfg.Images.Resolve(sb.Spec.Image)
	if err != nil {
		return fmt.Errorf("image %q: %w", sb.Spec.Image, err)
	}
	if err := m.cfg.Images.Lease(sb.ID, img.Digest); err != nil {
		return fmt.Errorf("leasing image %s: %w", img.Digest, err)
	}
	c.Add(func(context.Context) { m.releaseImage(sb.ID) })
	root, err := m.cfg.Images.RootFS(img.Digest)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Digest, err)
	}
	params.RootFS = root
	params.Env = sandbox.MergeEnv(img.Config.Env, params.Env)
	l.mu.Lock()
	l.sb.Spec.ImageDigest = string(img.Digest)
	if l.sb.Spec.Workdir == "" {
		l.sb.Spec.Workdir = img.Config.Workdir
	}
	if l.sb.Spec.User == "" {
		l.sb.Spec.User = img.Config.User
	}
	l.mu.Unlock()
	return nil
}

// releaseImage drops a sandbox's image lease (no-op without one).
func (m *Manager) releaseImage(id string) {
	if m.cfg.Images == nil {
		return
	}
	if err := m.cfg.Images.Release(id); err != nil {
		m.log.Error("releasing image lease", "sandbox", id, "err", err)
	}
}

// releaseOrphanLeases drops leases held for sandboxes with no live record.
func (m *Manager) releaseOrphanLeases(known map[string]bool) {
	if m.cfg.Images == nil {
		return
	}
	leases, err := m.cfg.Images.Leases()
	if err != nil {
		m.log.Error("listing image leases", "err", err)
		return
	}
	for id := range leases {
		if !known[id] {
			m.releaseImage(id)
		}
	}
}

// Images returns the image store (nil when the daemon has none).
func (m *Manager) Images() *imagestore.Store { return m.cfg.Images }

// ImageInUse reports whether a live sandbox leases the image d.
func (m *Manager) ImageInUse(d imagestore.Digest) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.live {
		if l.snapshot().Spec.ImageDigest == string(d) {
			return true
		}
	}
	return false
}

// PruneRuntimeCaches drops what runtimes derived from images that are gone
// (after an image prune), returning the bytes freed.
func (m *Manager) PruneRuntimeCaches() int64 {
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
