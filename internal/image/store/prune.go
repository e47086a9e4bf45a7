package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// PruneReport says what Prune freed, and what it kept and why.
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
	// Kept lists every image and layer Prune left, with the reason.
	Kept []Kept
}

// Why Prune keeps an image or a layer (Kept.Reason).
const (
	KeptTagged = "tagged" // an image a tag names
	KeptInUse  = "in_use" // an image a sandbox or memory snapshot leases
	KeptRecent = "recent" // younger than the grace period
	KeptUsed   = "used"   // a layer of a kept image
)

// Kept is an image or layer Prune left in the store.
type Kept struct {
	Kind   string // "image" or "layer"
	Digest Digest
	Reason string // KeptTagged, KeptInUse, KeptRecent or KeptUsed
	// Detail says more: the tags, the lease holders, the age, the image
	// that uses the layer.
	Detail string
	// Until is when a recent item stops being protected by its age (zero
	// for the other reasons).
	Until time.Time
}

// Prune removes the images no tag and no lease holds, then the mounts of
// images no lease holds, then the layers no remaining image uses, then the
// build cache entries whose layers are gone. Layers and untagged images
// younger than a grace period (ten minutes) are kept, so a build in
// progress does not lose what it has made before it tags it. The report
// lists what was kept and why.
func (s *Store) Prune(ctx context.Context) (PruneReport, error) {
	var rep PruneReport
	s.mu.Lock()
	defer s.mu.Unlock()
	leases, err := s.readLeases()
	if err != nil {
		return rep, fmt.Errorf("pruning: %w", err)
	}
	used, err := s.pruneImagesLocked(&rep, leases, time.Now())
	if err != nil {
		return rep, err
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	// Mounts before layers: a layer must not be removed under a mount.
	if err := s.pruneMountsLocked(&rep, leasedDigests(leases)); err != nil {
		return rep, err
	}
	if err := s.pruneLayersLocked(ctx, &rep, used, time.Now()); err != nil {
		return rep, err
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
			"mounts", len(rep.Mounts), "bytes", rep.Bytes, "kept", len(rep.Kept))
	}
	return rep, nil
}

// pruneImagesLocked removes the untagged, unleased images older than the
// grace period and returns, for each layer the kept images use, the first
// of them that uses it (its name for the report).
func (s *Store) pruneImagesLocked(rep *PruneReport, leases map[string]Digest, now time.Time) (map[Digest]string, error) {
	tags, err := s.readTags()
	if err != nil {
		return nil, fmt.Errorf("pruning: %w", err)
	}
	tagsOf := map[Digest][]string{}
	for ref, d := range tags {
		tagsOf[d] = append(tagsOf[d], ref)
	}
	holders := map[Digest][]string{}
	for holder, d := range leases {
		holders[d] = append(holders[d], holder)
	}
	imgs, err := s.imagesLocked()
	if err != nil {
		return nil, fmt.Errorf("pruning: %w", err)
	}
	used := map[Digest]string{}
	for _, img := range imgs {
		k := Kept{Kind: "image", Digest: img.Digest}
		switch {
		case len(tagsOf[img.Digest]) > 0:
			k.Reason, k.Detail = KeptTagged, "tagged "+list(tagsOf[img.Digest])
		case len(holders[img.Digest]) > 0:
			k.Reason, k.Detail = KeptInUse, "leased by "+list(holders[img.Digest])
		case now.Sub(img.Created) < s.grace:
			k.Reason, k.Until = KeptRecent, img.Created.Add(s.grace)
			k.Detail = fmt.Sprintf("untagged, created %s ago; untagged images are kept %s, for builds in progress", age(now, img.Created), s.grace)
		default:
			if err := os.Remove(s.imagePath(img.Digest)); err != nil {
				return nil, fmt.Errorf("pruning image %s: %w", img.Digest, err)
			}
			rep.Images = append(rep.Images, img.Digest)
			continue
		}
		rep.Kept = append(rep.Kept, k)
		// A layer is named by a tagged image that uses it, if any.
		name, byTag := string(img.Digest), len(tagsOf[img.Digest]) > 0
		if byTag {
			name = list(tagsOf[img.Digest])
		}
		for _, l := range img.Layers {
			if _, ok := used[l]; !ok || byTag {
				used[l] = name
			}
		}
	}
	return used, nil
}

// pruneMountsLocked removes the shared mounts of images no lease holds.
func (s *Store) pruneMountsLocked(rep *PruneReport, leased map[Digest]bool) error {
	ents, err := os.ReadDir(s.path("mounts"))
	if err != nil {
		return fmt.Errorf("pruning mounts: %w", err)
	}
	mps, err := mountpoints()
	if err != nil {
		return fmt.Errorf("pruning mounts: %w", err)
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
				return fmt.Errorf("pruning: unmounting %s: %w", target, err)
			}
		}
		if err := os.Remove(target); err != nil && !isNotExist(err) {
			return fmt.Errorf("pruning: %w", err)
		}
		if d != "" {
			rep.Mounts = append(rep.Mounts, d)
		}
	}
	return nil
}

// pruneLayersLocked removes the layers no kept image uses that are older
// than the grace period.
func (s *Store) pruneLayersLocked(ctx context.Context, rep *PruneReport, used map[Digest]string, now time.Time) error {
	layers, err := s.Layers()
	if err != nil {
		return fmt.Errorf("pruning: %w", err)
	}
	for _, l := range layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		if by, ok := used[l.Digest]; ok {
			rep.Kept = append(rep.Kept, Kept{Kind: "layer", Digest: l.Digest, Reason: KeptUsed, Detail: "used by image " + by})
			continue
		}
		if now.Sub(l.Created) < s.grace {
			rep.Kept = append(rep.Kept, Kept{Kind: "layer", Digest: l.Digest, Reason: KeptRecent, Until: l.Created.Add(s.grace),
				Detail: fmt.Sprintf("unused, added %s ago; unused layers are kept %s, for builds in progress", age(now, l.Created), s.grace)})
			continue
		}
		// Rename out first: layers/ never shows a half-removed layer.
		dead, err := os.MkdirTemp(s.path("tmp"), "dead-")
		if err != nil {
			return fmt.Errorf("pruning: %w", err)
		}
		if err := os.Rename(s.layerDir(l.Digest), filepath.Join(dead, "layer")); err != nil {
			os.Remove(dead)
			return fmt.Errorf("pruning layer %s: %w", l.Digest, err)
		}
		if err := os.RemoveAll(dead); err != nil {
			s.log.Warn("removing pruned layer", "op", "prune", "layer", l.Digest, "err", err)
		}
		rep.Layers = append(rep.Layers, l.Digest)
		rep.Bytes += l.Size
	}
	return nil
}

// list joins names, sorted, naming at most three.
func list(names []string) string {
	names = slices.Sorted(slices.Values(names))
	if len(names) > 3 {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
	}
	return strings.Join(names, ", ")
}

// age is now - t, rounded to the second.
func age(now, t time.Time) time.Duration {
	return max(now.Sub(t), 0).Round(time.Second)
}
