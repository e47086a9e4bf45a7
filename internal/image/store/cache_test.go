package store

import (
	"context"
	"errors"
	"slices"
	"testing"

	"corral/internal/errdefs"
)

func TestBuildCache(t *testing.T) {
	s := newStore(t)
	key := digestOf([]byte("step key"))
	if _, ok, err := s.CacheGet(key); ok || err != nil {
		t.Fatalf("empty cache: ok=%v err=%v", ok, err)
	}
	l := addLayer(t, s, entry{"a", "1"})
	want := CacheEntry{Layers: []Digest{l.Digest}, Config: ImageConfig{Env: []string{"A=1"}, User: "nobody"}}
	if err := s.CachePut(key, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.CacheGet(key)
	if err != nil || !ok || !slices.Equal(got.Layers, want.Layers) || got.Config.User != "nobody" || got.Created.IsZero() {
		t.Fatalf("CacheGet = %+v, %v, %v", got, ok, err)
	}

	// A layer that is not in the store cannot be cached.
	missing := digestOf([]byte("no such layer"))
	if err := s.CachePut(digestOf([]byte("k2")), CacheEntry{Layers: []Digest{missing}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("caching a missing layer: %v", err)
	}
	if err := s.CachePut("sha256:nothex", want); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a bad key: %v", err)
	}

	// Prune removes the layer (no image uses it), which turns the entry
	// into a miss, and then the entry itself.
	rep, err := s.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Layers) != 1 || rep.CacheEntries != 1 {
		t.Fatalf("prune report = %+v", rep)
	}
	if _, ok, err := s.CacheGet(key); ok || err != nil {
		t.Fatalf("after prune: ok=%v err=%v", ok, err)
	}
}

func TestBuildCacheKeptWhileImageUsesLayers(t *testing.T) {
	s := newStore(t)
	l := addLayer(t, s, entry{"a", "1"})
	img, err := s.PutImage([]Digest{l.Digest}, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Tag("kept:1", img.Digest); err != nil {
		t.Fatal(err)
	}
	key := digestOf([]byte("k"))
	if err := s.CachePut(key, CacheEntry{Layers: []Digest{l.Digest}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.CacheGet(key); !ok || err != nil {
		t.Fatalf("a cache entry whose layers a tagged image uses was lost: ok=%v err=%v", ok, err)
	}
}
