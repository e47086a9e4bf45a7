package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"corral/internal/errdefs"
)

// ImageConfig is how a sandbox of the image runs by default.
type ImageConfig struct {
	Env     []string `json:"env,omitempty"`
	Cmd     []string `json:"cmd,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	User    string   `json:"user,omitempty"`
}

// Image is a stack of layers and its configuration.
type Image struct {
	// Digest is the sha256 of the canonical JSON of {layers, config}.
	Digest Digest
	// Layers lists the layers bottom first.
	Layers []Digest
	Config ImageConfig
	// Created is when the image record was first written.
	Created time.Time
	// Tags are the name:tag references that point at the image.
	Tags []string
}

// imageSpec is what an image digest covers. Its JSON encoding is canonical:
// fixed field order, empty slices omitted.
type imageSpec struct {
	Layers []Digest     `json:"layers"`
	Config *ImageConfig `json:"config"`
}

// imageRecord is images/sha256/<hex>.json.
type imageRecord struct {
	Schema  int          `json:"schema"`
	Layers  []Digest     `json:"layers"`
	Config  *ImageConfig `json:"config"`
	Created time.Time    `json:"created"`
}

// Bounds on an image configuration.
const (
	maxConfigItems = 1024
	maxConfigItem  = 32 << 10
)

func specDigest(layers []Digest, cfg ImageConfig) (Digest, error) {
	b, err := json.Marshal(imageSpec{Layers: layers, Config: &cfg})
	if err != nil {
		return "", err
	}
	return digestOf(b), nil
}

func normalizeConfig(cfg ImageConfig) (ImageConfig, error) {
	if len(cfg.Env) == 0 {
		cfg.Env = nil
	}
	if len(cfg.Cmd) == 0 {
		cfg.Cmd = nil
	}
	if len(cfg.Env) > maxConfigItems || len(cfg.Cmd) > maxConfigItems {
		return cfg, errdefs.Invalid("config", "more than %d env or cmd items", maxConfigItems)
	}
	for _, v := range slices.Concat(cfg.Env, cfg.Cmd, []string{cfg.Workdir, cfg.User}) {
		if len(v) > maxConfigItem || strings.ContainsRune(v, 0) {
			return cfg, errdefs.Invalid("config", "item too long or holds a NUL byte")
		}
	}
	for _, e := range cfg.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return cfg, errdefs.Invalid("config.env", "%q is not KEY=VALUE", truncate(e))
		}
	}
	return cfg, nil
}

// PutImage records an image made of layers (bottom first), all of which must
// be in the store. Writing the same image twice returns the existing record.
func (s *Store) PutImage(layers []Digest, cfg ImageConfig) (Image, error) {
	if len(layers) == 0 || len(layers) > MaxLayers {
		return Image{}, errdefs.Invalid("layers", "an image has 1 to %d layers, not %d", MaxLayers, len(layers))
	}
	cfg, err := normalizeConfig(cfg)
	if err != nil {
		return Image{}, err
	}
	seen := map[Digest]bool{}
	for _, l := range layers {
		if _, err := ParseDigest(string(l)); err != nil {
			return Image{}, err
		}
		if seen[l] {
			return Image{}, errdefs.Invalid("layers", "layer %s listed twice", l)
		}
		seen[l] = true
	}
	d, err := specDigest(layers, cfg)
	if err != nil {
		return Image{}, fmt.Errorf("putting image: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range layers {
		if _, err := s.readLayer(l); err != nil {
			return Image{}, fmt.Errorf("putting image: %w", err)
		}
	}
	if img, err := s.readImage(d); err == nil {
		return s.withTags(img)
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return Image{}, err
	}
	rec := imageRecord{Schema: 1, Layers: slices.Clone(layers), Config: &cfg, Created: time.Now().UTC()}
	if err := writeJSONAtomic(s.imagePath(d), rec); err != nil {
		return Image{}, fmt.Errorf("putting image %s: %w", d, err)
	}
	return Image{Digest: d, Layers: rec.Layers, Config: cfg, Created: rec.Created}, nil
}

// readImage reads and validates an image record. Caller holds s.mu.
func (s *Store) readImage(d Digest) (Image, error) {
	p := s.imagePath(d)
	b, err := readBounded(p, maxRecord)
	if isNotExist(err) {
		return Image{}, fmt.Errorf("%w: image %s", errdefs.ErrNotFound, d)
	}
	if err != nil {
		return Image{}, err
	}
	var rec imageRecord
	if err := decodeStrict(p, b, &rec); err != nil {
		return Image{}, err
	}
	if rec.Schema != 1 || rec.Config == nil || len(rec.Layers) == 0 || len(rec.Layers) > MaxLayers {
		return Image{}, fmt.Errorf("corrupt record %s: bad schema, config or layer count", p)
	}
	for _, l := range rec.Layers {
		if _, err := ParseDigest(string(l)); err != nil {
			return Image{}, fmt.Errorf("corrupt record %s: %w", p, err)
		}
	}
	cfg, err := normalizeConfig(*rec.Config)
	if err != nil {
		return Image{}, fmt.Errorf("corrupt record %s: %w", p, err)
	}
	if got, err := specDigest(rec.Layers, cfg); err != nil || got != d {
		return Image{}, fmt.Errorf("corrupt record %s: content does not match its digest", p)
	}
	return Image{Digest: d, Layers: rec.Layers, Config: cfg, Created: rec.Created}, nil
}

func (s *Store) withTags(img Image) (Image, error) {
	tags, err := s.readTags()
	if err != nil {
		return Image{}, err
	}
	img.Tags = nil
	for ref, d := range tags {
		if d == img.Digest {
			img.Tags = append(img.Tags, ref)
		}
	}
	slices.Sort(img.Tags)
	return img, nil
}

// Tag points ref (name:tag, or name meaning name:latest) at the image d,
// moving the tag if it pointed elsewhere.
func (s *Store) Tag(ref string, d Digest) error {
	ref, err := ParseRef(ref)
	if err != nil {
		return err
	}
	if _, err := ParseDigest(string(d)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.readImage(d); err != nil {
		return fmt.Errorf("tagging %s: %w", ref, err)
	}
	tags, err := s.readTags()
	if err != nil {
		return err
	}
	if tags[ref] == d {
		return nil
	}
	tags[ref] = d
	return s.writeTags(tags)
}

// Resolve finds the image named by ref: name:tag, name (name:latest) or
// sha256:<hex>. ErrNotFound when there is none.
func (s *Store) Resolve(ref string) (Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, _, err := s.resolveLocked(ref)
	if err != nil {
		return Image{}, err
	}
	img, err := s.readImage(d)
	if err != nil {
		return Image{}, fmt.Errorf("resolving %s: %w", truncate(ref), err)
	}
	return s.withTags(img)
}

// resolveLocked returns the digest ref names and, for a tag, the normalized
// tag.
func (s *Store) resolveLocked(ref string) (Digest, string, error) {
	if strings.HasPrefix(ref, digestPrefix) {
		d, err := ParseDigest(ref)
		return d, "", err
	}
	name, err := ParseRef(ref)
	if err != nil {
		return "", "", err
	}
	tags, err := s.readTags()
	if err != nil {
		return "", "", err
	}
	d, ok := tags[name]
	if !ok {
		return "", "", fmt.Errorf("%w: image %s", errdefs.ErrNotFound, name)
	}
	return d, name, nil
}

// Images lists every image record, newest first.
func (s *Store) Images() ([]Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	imgs, err := s.imagesLocked()
	if err != nil {
		return nil, err
	}
	tags, err := s.readTags()
	if err != nil {
		return nil, err
	}
	byDigest := map[Digest][]string{}
	for ref, d := range tags {
		byDigest[d] = append(byDigest[d], ref)
	}
	for i := range imgs {
		imgs[i].Tags = byDigest[imgs[i].Digest]
		slices.Sort(imgs[i].Tags)
	}
	slices.SortFunc(imgs, func(a, b Image) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(string(a.Digest), string(b.Digest))
	})
	return imgs, nil
}

func (s *Store) imagesLocked() ([]Image, error) {
	dir := s.path("images", "sha256")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	var out []Image
	for _, e := range ents {
		hex, ok := strings.CutSuffix(e.Name(), ".json")
		if strings.HasPrefix(e.Name(), ".tmp-") {
			continue // an interrupted write
		}
		d, err := ParseDigest(digestPrefix + hex)
		if !ok || err != nil {
			return nil, fmt.Errorf("listing images: stray entry %s", filepath.Join(dir, e.Name()))
		}
		img, err := s.readImage(d)
		if err != nil {
			return nil, fmt.Errorf("listing images: %w", err)
		}
		out = append(out, img)
	}
	return out, nil
}

// RemoveImage removes a tag (name:tag or name) or, given a digest, every tag
// of that image. The image record goes too once no tag points at it and no
// lease holds it; its layers go at the next Prune. ErrNotFound when ref
// names nothing.
func (s *Store) RemoveImage(ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, name, err := s.resolveLocked(ref)
	if err != nil {
		return fmt.Errorf("removing image: %w", err)
	}
	if _, err := s.readImage(d); err != nil {
		return fmt.Errorf("removing image: %w", err)
	}
	tags, err := s.readTags()
	if err != nil {
		return err
	}
	changed := false
	for t, td := range tags {
		if (name != "" && t == name) || (name == "" && td == d) {
			delete(tags, t)
			changed = true
		}
	}
	if changed {
		if err := s.writeTags(tags); err != nil {
			return fmt.Errorf("removing image %s: %w", d, err)
		}
	}
	for _, td := range tags {
		if td == d {
			return nil // still tagged
		}
	}
	leases, err := s.readLeases()
	if err != nil {
		return err
	}
	if leasedDigests(leases)[d] {
		s.log.Info("image untagged but leased; kept until released", "op", "remove-image", "image", d)
		return nil
	}
	if err := os.Remove(s.imagePath(d)); err != nil && !isNotExist(err) {
		return fmt.Errorf("removing image %s: %w", d, err)
	}
	return syncDir(filepath.Dir(s.imagePath(d)))
}
