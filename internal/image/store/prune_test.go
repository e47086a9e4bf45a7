package store

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPruneSaysWhatItKept: every image and layer a prune leaves is in the
// report with its reason: tagged, leased (naming the holder), too young
// (saying until when), or used by a kept image; what it removes is not.
func TestPruneSaysWhatItKept(t *testing.T) {
	s := newStore(t)
	s.grace = defaultGrace
	a := addLayer(t, s, entry{"a", "1"})
	b := addLayer(t, s, entry{"b", "1"})
	c := addLayer(t, s, entry{"c", "1"})
	fresh := addLayer(t, s, entry{"fresh", "1"})
	old := addLayer(t, s, entry{"old", "12"})
	tagged, _ := s.PutImage([]Digest{a.Digest}, ImageConfig{})
	leased, _ := s.PutImage([]Digest{a.Digest, b.Digest}, ImageConfig{})
	young, _ := s.PutImage([]Digest{c.Digest}, ImageConfig{})
	stale, _ := s.PutImage([]Digest{old.Digest}, ImageConfig{Cmd: []string{"old"}})
	if err := s.Tag("keep:1", tagged.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.Lease("sb-aaaaaaaaaaaaaaab", leased.Digest); err != nil {
		t.Fatal(err)
	}
	hour := time.Hour
	backdate(t, s.imagePath(stale.Digest), hour)
	backdate(t, filepath.Join(s.layerDir(old.Digest), "layer.json"), hour)
	for _, d := range []Digest{tagged.Digest, leased.Digest} {
		backdate(t, s.imagePath(d), hour)
	}
	for _, d := range []Digest{a.Digest, b.Digest, c.Digest} {
		backdate(t, filepath.Join(s.layerDir(d), "layer.json"), hour)
	}

	rep, err := s.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Images, []Digest{stale.Digest}) || !slices.Equal(rep.Layers, []Digest{old.Digest}) || rep.Bytes != 2 {
		t.Fatalf("removed %v and %v (%d bytes): want the stale image and the old layer", rep.Images, rep.Layers, rep.Bytes)
	}
	got := map[Digest]Kept{}
	for _, k := range rep.Kept {
		got[k.Digest] = k
		t.Logf("kept %s %s: %s: %s", k.Kind, k.Digest[:15], k.Reason, k.Detail)
	}
	want := []struct {
		d            Digest
		kind, reason string
		detail       string
		until        bool
	}{
		{tagged.Digest, "image", KeptTagged, "tagged keep:1", false},
		{leased.Digest, "image", KeptInUse, "leased by sb-aaaaaaaaaaaaaaab", false},
		{young.Digest, "image", KeptRecent, "untagged images are kept 10m0s", true},
		{a.Digest, "layer", KeptUsed, "used by image keep:1", false},
		{b.Digest, "layer", KeptUsed, "used by image " + string(leased.Digest), false},
		{c.Digest, "layer", KeptUsed, "used by image " + string(young.Digest), false},
		{fresh.Digest, "layer", KeptRecent, "unused layers are kept 10m0s", true},
	}
	if len(rep.Kept) != len(want) {
		t.Errorf("kept %d items, want %d", len(rep.Kept), len(want))
	}
	for _, w := range want {
		k, ok := got[w.d]
		if !ok {
			t.Errorf("%s %s not in the report", w.kind, w.d)
			continue
		}
		if k.Kind != w.kind || k.Reason != w.reason || !strings.Contains(k.Detail, w.detail) || k.Until.IsZero() == w.until {
			t.Errorf("%s: got %+v, want kind %s, reason %s, detail with %q, until set %v", w.d, k, w.kind, w.reason, w.detail, w.until)
		}
		if w.until && (k.Until.Before(time.Now().Add(9*time.Minute)) || k.Until.After(time.Now().Add(10*time.Minute))) {
			t.Errorf("%s: until %v, want about ten minutes from now", w.d, k.Until)
		}
	}
}

// backdate moves the created time in the JSON record at p back by d.
func backdate(t *testing.T, p string, d time.Duration) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	created, err := time.Parse(time.RFC3339Nano, rec["created"].(string))
	if err != nil {
		t.Fatal(err)
	}
	rec["created"] = created.Add(-d)
	if b, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
