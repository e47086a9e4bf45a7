package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A write a crash interrupted (its temporary file) is gone once the store
// opens again; the records beside it stay.
func TestOpenRemovesInterruptedWrites(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := Digest(digestPrefix + strings.Repeat("a", 64))
	if err := writeFileAtomic(s.path("leases", "sb-aaaaaaaaaaaaaaaa"), []byte(string(d)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var tmps []string
	for _, dir := range []string{"", "leases", "images/sha256"} {
		p := filepath.Join(s.path(dir), ".tmp-x-123")
		if err := os.WriteFile(p, []byte("half"), 0o644); err != nil {
			t.Fatal(err)
		}
		tmps = append(tmps, p)
	}
	if _, err := Open(root, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range tmps {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
	if _, err := os.Stat(s.path("leases", "sb-aaaaaaaaaaaaaaaa")); err != nil {
		t.Errorf("the lease beside them went: %v", err)
	}
}
