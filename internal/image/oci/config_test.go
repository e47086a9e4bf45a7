package oci

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"corral/internal/errdefs"
)

// TestImportRefusesBadConfig: an image whose run config a sandbox could
// not use is refused at import (and pull), naming the field, with nothing
// stored; what real images carry passes.
func TestImportRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(c *v1.Config)
		field string // "" for a config that must import
	}{
		{"relative workdir", func(c *v1.Config) { c.WorkingDir = "app" }, "config.WorkingDir"},
		{"workdir with a newline", func(c *v1.Config) { c.WorkingDir = "/app\n" }, "config.WorkingDir"},
		{"user with spaces", func(c *v1.Config) { c.User = "no body" }, "config.User"},
		{"user with two groups", func(c *v1.Config) { c.User = "1000:1000:1000" }, "config.User"},
		{"env without =", func(c *v1.Config) { c.Env = []string{"PATH=/bin", "JUSTAKEY"} }, "config.Env[1]"},
		{"env with an empty key", func(c *v1.Config) { c.Env = []string{"=x"} }, "config.Env[0]"},
		{"env key with a space", func(c *v1.Config) { c.Env = []string{"A B=x"} }, "config.Env[0]"},
		{"empty entrypoint name", func(c *v1.Config) { c.Entrypoint = []string{"", "x"} }, "config.Entrypoint"},
		{"empty cmd name", func(c *v1.Config) { c.Entrypoint, c.Cmd = nil, []string{""} }, "config.Cmd"},
		{"cmd with a NUL", func(c *v1.Config) { c.Cmd = []string{"a\x00b"} }, "config.Cmd"},
		{"usual config", func(c *v1.Config) {
			c.WorkingDir, c.User, c.Env, c.Cmd = "/srv/app", "node:1000", []string{"PATH=/usr/bin", "EMPTY="}, []string{"node", ""}
		}, ""},
		{"empty config", func(c *v1.Config) { *c = v1.Config{} }, ""},
		{"entrypoint with an empty argument", func(c *v1.Config) { c.Entrypoint, c.Cmd = []string{"/bin/sh", ""}, []string{""} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := testImage(t)
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cf = cf.DeepCopy()
			tt.edit(&cf.Config)
			if img, err = mutate.ConfigFile(img, cf); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), "img.tar")
			tag, _ := name.NewTag("example.com/corral/test:v1")
			if err := tarball.WriteToFile(p, tag, img); err != nil {
				t.Fatal(err)
			}
			st := openStore(t)
			_, err = Import(context.Background(), st, p, "corral/x")
			if tt.field == "" {
				if err != nil {
					t.Fatalf("import: %v", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.field+":") {
				t.Fatalf("err = %v, want invalid argument naming %s", err, tt.field)
			}
			if imgs, _ := st.Images(); len(imgs) != 0 {
				t.Errorf("images stored: %v", imgs)
			}
			if ls, _ := st.Layers(); len(ls) != 0 {
				t.Errorf("layers stored: %v", ls)
			}
			t.Log(err)
		})
	}
}

// TestPullRefusesBadConfig: a pull checks the config the same way.
func TestPullRefusesBadConfig(t *testing.T) {
	host, _ := serve(t)
	img := testImage(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.WorkingDir = "relative/dir"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	push(t, img, host+"/corral/badcfg:v1")
	_, err = Pull(context.Background(), openStore(t), host+"/corral/badcfg:v1", PullOptions{})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "config.WorkingDir:") {
		t.Fatalf("err = %v, want invalid argument naming config.WorkingDir", err)
	}
}
