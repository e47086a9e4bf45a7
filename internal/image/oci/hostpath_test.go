package oci

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral/internal/errdefs"
)

// TestImportErrorsNameNoHostPath: whatever is wrong with an archive, the
// error names neither the file the daemon read it from nor the directory
// it unpacked it into (an API caller must not learn the host's layout).
func TestImportErrorsNameNoHostPath(t *testing.T) {
	cases := map[string][]tarFile{
		"layout without index.json":     {{"oci-layout", `{"imageLayoutVersion":"1.0.0"}`}},
		"layout with a bad index":       {{"oci-layout", `{"imageLayoutVersion":"1.0.0"}`}, {"index.json", `{"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:` + strings.Repeat("a", 64) + `","size":10}]}`}},
		"layout with a broken index":    {{"oci-layout", `{"imageLayoutVersion":"1.0.0"}`}, {"index.json", `{`}},
		"docker archive, layer missing": {{"manifest.json", `[{"Config":"c.json","Layers":["l.tar"]}]`}, {"c.json", `{}`}},
		"docker archive, bad config":    {{"manifest.json", `[{"Config":"c.json","Layers":["l.tar"]}]`}, {"c.json", `{`}, {"l.tar", ""}},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			st := openStore(t)
			dir := t.TempDir()
			p := filepath.Join(dir, "upload-1234.tar")
			writeTar(t, p, files)
			_, err := Import(context.Background(), st, p, "")
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("err = %v, want invalid argument", err)
			}
			for _, host := range []string{dir, st.Root(), "upload-1234", "oci-import-"} {
				if strings.Contains(err.Error(), host) {
					t.Errorf("error %q names %q", err, host)
				}
			}
			t.Log(err)
		})
	}
}

type tarFile struct{ name, body string }

func writeTar(t *testing.T, p string, files []tarFile) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, tf := range files {
		if err := tw.WriteHeader(&tar.Header{Name: tf.name, Mode: 0o644, Size: int64(len(tf.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(tf.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}
