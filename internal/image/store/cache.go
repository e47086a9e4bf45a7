package store

import (
	"fmt"
	"os"
	"strings"
	"time"

	"corral/internal/errdefs"
)

// CacheEntry is a cached build result: the image a build had after one of
// its steps, under a key the builder derives from everything that step's
// result depends on. Entries hold no layers: Prune may remove the layers
// an entry names (when no image uses them any more), which turns the
// entry into a miss, and then removes the entry.
type CacheEntry struct {
	Layers  []Digest    `json:"layers"`
	Config  ImageConfig `json:"config"`
	Created time.Time   `json:"created"`
}

// cacheRecord is buildcache/<key hex>.json.
type cacheRecord struct {
	Schema int `json:"schema"`
	CacheEntry
}

func (s *Store) cachePath(key Digest) string {
	return s.path("buildcache", key.Hex()+".json")
}

// CacheGet returns the entry under key when it exists and every layer it
// names is still in the store.
func (s *Store) CacheGet(key Digest) (CacheEntry, bool, error) {
	if _, err := ParseDigest(string(key)); err != nil {
		return CacheEntry{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.readCache(key)
	if isNotExist(err) {
		return CacheEntry{}, false, nil
	}
	if err != nil {
		return CacheEntry{}, false, err
	}
	for _, l := range e.Layers {
		if _, err := s.readLayer(l); err != nil {
			return CacheEntry{}, false, nil
		}
	}
	return e, true, nil
}

// CachePut records e under key; its layers must be in the store.
func (s *Store) CachePut(key Digest, e CacheEntry) error {
	if _, err := ParseDigest(string(key)); err != nil {
		return err
	}
	if len(e.Layers) == 0 || len(e.Layers) > MaxLayers {
		return errdefs.Invalid("layers", "a cache entry has 1 to %d layers, not %d", MaxLayers, len(e.Layers))
	}
	cfg, err := normalizeConfig(e.Config)
	if err != nil {
		return err
	}
	e.Config = cfg
	if e.Created.IsZero() {
		e.Created = time.Now().UTC()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range e.Layers {
		if _, err := s.readLayer(l); err != nil {
			return fmt.Errorf("caching %s: %w", key, err)
		}
	}
	if err := os.MkdirAll(s.path("buildcache"), 0o755); err != nil {
		return fmt.Errorf("caching %s: %w", key, err)
	}
	return writeJSONAtomic(s.cachePath(key), cacheRecord{Schema: 1, CacheEntry: e})
}

func (s *Store) readCache(key Digest) (CacheEntry, error) {
	p := s.cachePath(key)
	b, err := readBounded(p, maxRecord)
	if err != nil {
		return CacheEntry{}, err
	}
	var rec cacheRecord
	if err := decodeStrict(p, b, &rec); err != nil {
		return CacheEntry{}, err
	}
	if rec.Schema != 1 {
		return CacheEntry{}, fmt.Errorf("corrupt record %s: schema %d", p, rec.Schema)
	}
	for _, l := range rec.Layers {
		if _, err := ParseDigest(string(l)); err != nil {
			return CacheEntry{}, fmt.Errorf("corrupt record %s: %w", p, err)
		}
	}
	return rec.CacheEntry, nil
}

// pruneCacheLocked removes the entries that name a layer no longer in the
// store (or that cannot be read). The caller holds s.mu.
func (s *Store) pruneCacheLocked() (int, error) {
	ents, err := os.ReadDir(s.path("buildcache"))
	if isNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ent := range ents {
		hex, ok := strings.CutSuffix(ent.Name(), ".json")
		key, err := ParseDigest(digestPrefix + hex)
		if !ok || err != nil {
			continue
		}
		if s.cacheValidLocked(key) {
			continue
		}
		if err := os.Remove(s.cachePath(key)); err != nil && !isNotExist(err) {
			return n, err
		}
		n++
	}
	return n, nil
}

func (s *Store) cacheValidLocked(key Digest) bool {
	e, err := s.readCache(key)
	if err != nil {
		return false
	}
	for _, l := range e.Layers {
		if _, err := s.readLayer(l); err != nil {
			return false
		}
	}
	return true
}
