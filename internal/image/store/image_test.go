package store

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"corral/internal/errdefs"
)

func TestParseDigest(t *testing.T) {
	good := "sha256:" + strings.Repeat("0a", 32)
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{good, true},
		{strings.ToUpper(good), false},
		{"sha256:" + strings.Repeat("0A", 32), false},
		{"sha512:" + strings.Repeat("0a", 32), false},
		{good + "0", false},
		{good[:len(good)-1], false},
		{"sha256:../../../../etc/passwd" + strings.Repeat("a", 35), false},
		{"", false},
	} {
		_, err := ParseDigest(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseDigest(%q) err = %v", tt.in, err)
		}
	}
}

func TestParseRef(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"python", "python:latest"},
		{"python:3.12", "python:3.12"},
		{"corral/base:v1", "corral/base:v1"},
		{"registry.example.com:5000/team/app:1.0", "registry.example.com:5000/team/app:1.0"},
		{"registry.example.com:5000/app", "registry.example.com:5000/app:latest"},
		{"Python", ""},
		{"py thon", ""},
		{"../etc:x", ""},
		{"a:", ""},
		{":tag", ""},
		{"a:b:c", ""},
		{"a/:b", ""},
		{"a:" + strings.Repeat("t", 129), ""},
		{strings.Repeat("a", 256), ""},
		{"sha256:" + strings.Repeat("0a", 32), ""},
	} {
		got, err := ParseRef(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("ParseRef(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRef(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"a", "a:b", "r.io:1/a/b:c", "sha256:00", ":::", "a//b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParseRef(s)
		if err != nil {
			return
		}
		if again, err := ParseRef(ref); err != nil || again != ref {
			t.Fatalf("ParseRef(%q) = %q, not a fixed point (%q, %v)", s, ref, again, err)
		}
		if strings.ContainsAny(ref, " \x00\n") || strings.Contains(ref, "..") {
			t.Fatalf("ParseRef(%q) accepted %q", s, ref)
		}
	})
}

func TestImagesTagsResolveRemove(t *testing.T) {
	s := newStore(t)
	l1 := addLayer(t, s, entry{"a", "1"})
	l2 := addLayer(t, s, entry{"b", "2"})
	cfg := ImageConfig{Env: []string{"PATH=/bin"}, Cmd: []string{"sh"}, Workdir: "/", User: "1000"}
	img, err := s.PutImage([]Digest{l1.Digest, l2.Digest}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.PutImage([]Digest{l1.Digest, l2.Digest}, cfg)
	if err != nil || again.Digest != img.Digest || !again.Created.Equal(img.Created) {
		t.Fatalf("same image again: %+v, %v", again, err)
	}
	other, err := s.PutImage([]Digest{l2.Digest, l1.Digest}, cfg)
	if err != nil || other.Digest == img.Digest {
		t.Fatalf("layer order must change the digest: %+v, %v", other, err)
	}

	if err := s.Tag("app", img.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.Tag("app:v1", img.Digest); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"app", "app:latest", "app:v1", string(img.Digest)} {
		got, err := s.Resolve(ref)
		if err != nil || got.Digest != img.Digest || !slices.Equal(got.Layers, img.Layers) ||
			!slices.Equal(got.Config.Env, cfg.Env) || !slices.Equal(got.Tags, []string{"app:latest", "app:v1"}) {
			t.Fatalf("Resolve(%q) = %+v, %v", ref, got, err)
		}
	}
	imgs, err := s.Images()
	if err != nil || len(imgs) != 2 {
		t.Fatalf("Images() = %+v, %v", imgs, err)
	}

	// Errors.
	if _, err := s.Resolve("nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Resolve(nope) err = %v", err)
	}
	if _, err := s.Resolve("BAD REF"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Resolve(bad) err = %v", err)
	}
	missing := Digest("sha256:" + strings.Repeat("ee", 32))
	if _, err := s.PutImage([]Digest{missing}, cfg); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("PutImage(missing layer) err = %v", err)
	}
	if err := s.Tag("x", missing); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Tag(missing image) err = %v", err)
	}
	many := make([]Digest, MaxLayers+1)
	if _, err := s.PutImage(many, cfg); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("PutImage(%d layers) err = %v", len(many), err)
	}
	if _, err := s.PutImage([]Digest{l1.Digest, l1.Digest}, cfg); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("PutImage(duplicate layer) err = %v", err)
	}
	if _, err := s.PutImage([]Digest{l1.Digest}, ImageConfig{Env: []string{"NOEQUALS"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("PutImage(bad env) err = %v", err)
	}

	// Remove: one tag at a time; the record goes with the last.
	if err := s.RemoveImage("app"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve("app"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("removed tag still resolves: %v", err)
	}
	if got, err := s.Resolve(string(img.Digest)); err != nil || !slices.Equal(got.Tags, []string{"app:v1"}) {
		t.Fatalf("after untag: %+v, %v", got, err)
	}
	if err := s.RemoveImage("app:v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(string(img.Digest)); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("untagged unleased image kept: %v", err)
	}
	if err := s.RemoveImage("app:v1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("RemoveImage twice: %v", err)
	}
	// By digest: every tag goes; a leased image's record stays.
	if err := s.Tag("o:1", other.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.Lease("sb-aaaaaaaaaaaaaaab", other.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveImage(string(other.Digest)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Resolve(string(other.Digest)); err != nil || len(got.Tags) != 0 {
		t.Fatalf("leased image after remove: %+v, %v", got, err)
	}
}

func TestLeases(t *testing.T) {
	s := newStore(t)
	l := addLayer(t, s, entry{"a", "1"})
	a, _ := s.PutImage([]Digest{l.Digest}, ImageConfig{})
	b, _ := s.PutImage([]Digest{l.Digest}, ImageConfig{Cmd: []string{"x"}})
	if err := s.Lease("sb-aaaaaaaaaaaaaaab", a.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.Lease("sb-aaaaaaaaaaaaaaab", a.Digest); err != nil {
		t.Fatalf("lease again: %v", err)
	}
	if err := s.Lease("sb-aaaaaaaaaaaaaaab", b.Digest); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("second image for one sandbox: %v", err)
	}
	for _, id := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("a", 200)} {
		if err := s.Lease(id, a.Digest); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Lease(%q) err = %v", id, err)
		}
	}
	if err := s.Lease("sb-aaaaaaaaaaaaaaac", Digest("sha256:"+strings.Repeat("ee", 32))); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("lease of a missing image: %v", err)
	}
	// A filesystem-only pause moves a sandbox's lease to its new image.
	if err := s.MoveLease("sb-aaaaaaaaaaaaaaab", b.Digest); err != nil {
		t.Fatal(err)
	}
	if leases, _ := s.Leases(); leases["sb-aaaaaaaaaaaaaaab"] != b.Digest {
		t.Fatalf("after MoveLease: %v", leases)
	}
	if err := s.MoveLease("sb-aaaaaaaaaaaaaaab", Digest("sha256:"+strings.Repeat("ee", 32))); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("moving a lease to a missing image: %v", err)
	}
	if err := s.MoveLease("../x", a.Digest); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("MoveLease of a bad holder: %v", err)
	}
	if err := s.Release("sb-aaaaaaaaaaaaaaab"); err != nil {
		t.Fatal(err)
	}
	if err := s.Release("sb-aaaaaaaaaaaaaaab"); err != nil {
		t.Fatalf("release twice: %v", err)
	}
	if leases, err := s.Leases(); err != nil || len(leases) != 0 {
		t.Fatalf("Leases() = %v, %v", leases, err)
	}
}

func TestCorruptRecordsAreErrorsNamingTheFile(t *testing.T) {
	s := newStore(t)
	l := addLayer(t, s, entry{"a", "1"})
	img, err := s.PutImage([]Digest{l.Digest}, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path, body string
		call             func() error
	}{
		{"image json", s.imagePath(img.Digest), `{"schema":1,`, func() error { _, err := s.Images(); return err }},
		{"image digest", s.imagePath(img.Digest), `{"schema":1,"layers":["` + string(l.Digest) + `"],"config":{"cmd":["evil"]},"created":"2020-01-01T00:00:00Z"}`,
			func() error { _, err := s.Resolve(string(img.Digest)); return err }},
		{"tags", s.path("tags.json"), `{"schema":1,"tags":{"../x":"sha256:00"}}`, func() error { _, err := s.Resolve("x"); return err }},
		{"lease", s.path("leases", "sb-aaaaaaaaaaaaaaab"), "not a digest", func() error { _, err := s.Leases(); return err }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old, _ := os.ReadFile(tt.path)
			if err := os.WriteFile(tt.path, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(tt.path, old, 0o644)
			err := tt.call()
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tt.path)) {
				t.Fatalf("err = %v, want one naming %s", err, tt.path)
			}
		})
	}
}
