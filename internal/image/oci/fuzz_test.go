package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"corral/internal/errdefs"
	"corral/internal/image/store"
	"corral/internal/image/tartest"
)

// FuzzImport imports arbitrary bytes as an archive file into a fresh store.
// It must not panic; nothing outside the store's directory may appear or
// change; the store's tmp/ is empty afterwards; an error is
// ErrInvalidArgument (the file is there and the store works, so only the
// archive can be at fault) and leaves no image behind; a success is tagged.
// Header checksums of the outer tar are recomputed first, so that mutated
// headers get past archive/tar.
func FuzzImport(f *testing.F) {
	for _, s := range importSeeds(f) {
		f.Add(s)
	}
	log := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, data []byte) {
		data = tartest.FixChecksums(data)
		base := t.TempDir()
		archive := filepath.Join(base, "archive.tar")
		if err := os.WriteFile(archive, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(base, "outside"), 0o755); err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(filepath.Join(base, "store"), log)
		if err != nil {
			t.Fatal(err)
		}
		before := treeOutside(t, base)
		img, err := Import(context.Background(), st, archive, "corral/fuzz:1")
		if after := treeOutside(t, base); after != before {
			t.Fatalf("the import changed files outside the store:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if ents, _ := os.ReadDir(filepath.Join(st.Root(), "tmp")); len(ents) != 0 {
			t.Errorf("tmp not emptied: %v", ents)
		}
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("err = %v (%s), want invalid argument", err, errdefs.Code(err))
			}
			if imgs, _ := st.Images(); len(imgs) != 0 {
				t.Fatalf("a failed import left images: %v", imgs)
			}
			return
		}
		if res, err := st.Resolve("corral/fuzz:1"); err != nil || res.Digest != img.Digest {
			t.Fatalf("the tag resolves to %v (%v), want %s", res.Digest, err, img.Digest)
		}
	})
}

// importSeeds are a docker archive and an OCI layout tar of a one-layer
// image, whole and cut short, and a few hostile tables of contents.
func importSeeds(f *testing.F) [][]byte {
	img, err := mutate.AppendLayers(empty.Image, tarLayer(f, map[string]string{"etc/hello": "hi\n"}))
	if err != nil {
		f.Fatal(err)
	}
	var docker bytes.Buffer
	if err := tarball.Write(name.MustParseReference("corral/seed:1"), img, &docker); err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		f.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		f.Fatal(err)
	}
	tarDir(f, filepath.Join(dir, "layout"), filepath.Join(dir, "layout.tar"))
	oci, err := os.ReadFile(filepath.Join(dir, "layout.tar"))
	if err != nil {
		f.Fatal(err)
	}
	return [][]byte{
		docker.Bytes(), docker.Bytes()[:docker.Len()/2],
		oci, oci[:len(oci)/2],
		seedTar(f, "manifest.json", `[{"Config":"../../etc/passwd","Layers":["/etc/shadow"]}]`, "../../etc/passwd", "{}", "/etc/shadow", ""),
		seedTar(f, "manifest.json", `[]`),
		seedTar(f, "oci-layout", `{"imageLayoutVersion":"1.0.0"}`, "index.json",
			`{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:`+strings.Repeat("0", 64)+`","size":2}]}`,
			"blobs/sha256/"+strings.Repeat("0", 64), "{}"),
		{}, bytes.Repeat([]byte("not a tar "), 60),
	}
}

// seedTar is a tar of regular files given as name, content pairs.
func seedTar(f *testing.F, kv ...string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i+1 < len(kv); i += 2 {
		if err := tw.WriteHeader(&tar.Header{Name: kv[i], Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(kv[i+1]))}); err != nil {
			f.Fatal(err)
		}
		if _, err := tw.Write([]byte(kv[i+1])); err != nil {
			f.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}

// treeOutside describes everything under base except store/: each path,
// its mode, and a regular file's content hash.
func treeOutside(t *testing.T, base string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, p)
		if rel == "store" {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v", rel, fi.Mode())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
