package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// PruneReport says what Prune freed.
type PruneReport struct {
	Images []Digest
	Layers []Digest
	// Mounts lists the images whose shared mount was removed.
	Mounts []Digest
	// CacheEntries counts the build cache entries dropped because a layer
	// they named was removed.
	CacheEntries int
	// Bytes approximates the disk space freed (sum of layer sizes).
	Bytes int64
}

// Prune removes the images no tag and no lease holds, then the mounts of
// images no lease holds, then the layers no remaining image uses, then the
// build cache entries whose layers are gone. Layers and untagged images younger than a grace period (ten minutes) are kept, so a
// build in progress does not lose what it has made before it tags it.
func (s *Store) Prune(ctx context.Context) (PruneReport, error) {
	var rep PruneReport
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	leases, err := s.readLeases()
	if err != nil {
		return rep, fmt.Errorf("pruning: %w", err)
	}
	leased := leasedDigests(leases)
	tags, err := s.readTags()
	if err != nil {
		return rep, fmt.Errorf("pruning: %w", err)
	}
	tagged := map[Digest]bool{}
	for _, d := range tags {
		tagged[d] = true
	}
	imgs, err := s.imagesLocked()
	if err != nil {
		return rep, fmt.Errorf("pruning: %w", err)
	}
	used := map[Digest]bool{}
	for _, img := range imgs {
		if !tagged[img.Digest] && !leased[img.Digest] && now.Sub(img.Created) >= s.grace {
			if err := os.Remove(s.imagePath(img.Digest)); err != nil {
				return rep, fmt.Errorf("pruning image %s: %w", img.Digest, err)
			}
			rep.Images = append(rep.Images, img.Digest)
			continue
		}
		for _, l := range img.Layers {
			used[l] = true
		}
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}

	// Mounts before layers: a layer must not be removed under a mount.
	ents, err := os.ReadDir(s.path("mounts"))
	if err != nil {
		return rep, fmt.Errorf("pruning mounts: %w", err)
	}
	mps, err := mountpoints()
	if err != nil {
		return rep, fmt.Errorf("pruning mounts: %w", err)
	}
	for _, e := range ents {
		d, err := ParseDigest(digestPrefix + e.Name())
		if err == nil && leased[d] {
			continue
		}
		target := s.path("mounts", e.Name())
		if mps[target] {
			// No sandbox holds it; detach so a straggling reader cannot
			// keep the store from making progress.
			if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
				return rep, fmt.Errorf("pruning: unmounting %s: %w", target, err)
			}
		}
		if err := os.Remove(target); err != nil && !isNotExist(err) {
			return rep, fmt.Errorf("pruning: %w", err)
		}
		if d != "" {
			rep.Mounts = append(rep.Mounts, d)
		}
	}

	layers, err := s.Layers()
	if err != nil {
		return rep, fmt.Errorf("pruning: %w", err)
	}
	for _, l := range layers {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if used[l.Digest] || now.Sub(l.Created) < s.grace {
			continue
		}
		// Rename out first: layers/ never shows a half-removed layer.
		dead, err := os.MkdirTemp(s.path("tmp"), "dead-")
		if err != nil {
			return rep, fmt.Errorf("pruning: %w", err)
		}
		if err := os.Rename(s.layerDir(l.Digest), filepath.Join(dead, "layer")); err != nil {
			os.Remove(dead)
			return rep, fmt.Errorf("pruning layer %s: %w", l.Digest, err)
		}
		if err := os.RemoveAll(dead); err != nil {
			s.log.Warn("removing pruned layer", "op", "prune", "layer", l.Digest, "err", err)
		}
		rep.Layers = append(rep.Layers, l.Digest)
		rep.Bytes += l.Size
	}
	n, err := s.pruneCacheLocked()
	if err != nil {
		return rep, fmt.Errorf("pruning the build cache: %w", err)
	}
	rep.CacheEntries = n
	for _, dir := range []string{"images/sha256", "layers/sha256", "mounts"} {
		if err := syncDir(s.path(dir)); err != nil {
			return rep, fmt.Errorf("pruning: %w", err)
		}
	}
	if len(rep.Images)+len(rep.Layers)+len(rep.Mounts) > 0 {
		s.log.Info("pruned", "op", "prune", "images", len(rep.Images), "layers", len(rep.Layers),
			"mounts", len(rep.Mounts), "bytes", rep.Bytes)
	}
	return rep, nil
}
