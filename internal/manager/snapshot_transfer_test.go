package manager

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/sandbox"
)

// Only the runtime version that saved a snapshot restores it; the
// refusal names both versions.
func TestSameRuntimeRefusesAnotherVersion(t *testing.T) {
	rec := &sandbox.Snapshot{ID: "snap-aaaaaaaaaaaaaaaa", Runtime: "gvisor", RuntimeVersion: "release-20260905.0", AgentProtocol: 1}
	if err := sameRuntime(rec, "release-20260905.0"); err != nil {
		t.Fatalf("the same version: %v", err)
	}
	err := sameRuntime(rec, "release-20270101.0")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "release-20260905.0") || !strings.Contains(err.Error(), "release-20270101.0") {
		t.Fatalf("another version: %v; want failed_precondition naming both", err)
	}
	rec.AgentProtocol = 999
	if err := sameRuntime(rec, "release-20260905.0"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("an agent protocol this daemon does not speak: %v", err)
	}
}

// Export writes the record (with the spec's secret values beside it)
// and the files; reading the stream back gives them all, inside a new
// directory. A daemon whose runtime cannot restore it refuses the import
// before writing anything.
func TestExportImportStream(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rec := &sandbox.Snapshot{ID: ids.NewSnapshot(), Name: "base", SandboxID: "sb-x", Runtime: "gvisor", AgentProtocol: 1,
		Spec: sandbox.Spec{Image: "base", SecretEnv: map[string]string{"TOKEN": "s3cret"}}, CreatedAt: time.Now().UTC()}
	rec.Dir = filepath.Join(e.dir, "snapshots", rec.ID)
	for name, body := range map[string]string{"checkpoint.img": "memory", "sub/pages.img": "pages"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(rec.Dir, name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rec.Dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.store.PutSnapshot(ctx, rec); err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := e.m.Snapshots().Export(ctx, "base", &stream); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(stream.Bytes()))
	got, err := readTransferRecord(tr)
	if err != nil || got.ID != rec.ID || got.Name != "base" || got.Dir != "" || got.Spec.SecretEnv["TOKEN"] != "s3cret" {
		t.Fatalf("the record: %+v, %v", got, err)
	}
	dir := filepath.Join(t.TempDir(), "in")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := untarSnapshot(ctx, tr, dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub/pages.img")); err != nil || string(b) != "pages" {
		t.Fatalf("an imported file: %q, %v", b, err)
	}
	// The in-process runtime takes no memory snapshots.
	_, err = e.m.Snapshots().Import(ctx, bytes.NewReader(stream.Bytes()))
	if !errors.Is(err, errdefs.ErrNotSupported) {
		t.Fatalf("an import this daemon cannot restore: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.dir, "snapshots")); len(ents) != 1 {
		t.Fatalf("a refused import left files: %v", ents)
	}
}

// A stream's entries stay inside the new directory: no escaping or
// absolute names, no links or devices, no entry twice, no more bytes
// than the limit.
func TestUntarSnapshotRefusesBadEntries(t *testing.T) {
	for name, entries := range map[string][]tar.Header{
		"dotdot":   {{Name: "files/../x", Typeflag: tar.TypeReg}},
		"absolute": {{Name: "/files/x", Typeflag: tar.TypeReg}},
		"outside":  {{Name: "x", Typeflag: tar.TypeReg}},
		"symlink":  {{Name: "files/l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}},
		"hardlink": {{Name: "files/l", Typeflag: tar.TypeLink, Linkname: "files/a"}},
		"device":   {{Name: "files/d", Typeflag: tar.TypeChar}},
		"twice":    {{Name: "files/a", Typeflag: tar.TypeReg}, {Name: "files/a", Typeflag: tar.TypeReg}},
		"too big":  {{Name: "files/a", Typeflag: tar.TypeReg, Size: 2048}},
		"unclean":  {{Name: "files/a//b", Typeflag: tar.TypeReg}},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range entries {
			h.Mode = 0o600
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				_, _ = tw.Write(make([]byte, h.Size))
			}
		}
		tw.Close()
		dir := t.TempDir()
		err := untarSnapshot(context.Background(), tar.NewReader(&buf), dir, 1024)
		if !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, errdefs.ErrResourceExhausted) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
}
