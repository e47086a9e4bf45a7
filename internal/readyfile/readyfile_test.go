package readyfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ready")
	if err := Write(path, map[string]int{"pid": 7}); err != nil {
		t.Fatal(err)
	}
	var got map[string]int
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &got); err != nil || got["pid"] != 7 {
		t.Fatalf("%s: %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("left beside it: %v", ents)
	}
	if err := Write(filepath.Join(t.TempDir(), "missing", "ready"), 1); err == nil {
		t.Error("no error for a missing directory")
	}
}
