package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogFileRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "corral.log")
	l, err := OpenLogFile(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 39) + "\n" // 40 bytes: two a file
	for i := 0; i < 9; i++ {
		if _, err := l.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"corral.log", "corral.log.1", "corral.log.2"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.Size() > 100 || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %d bytes, mode %v", name, st.Size(), st.Mode().Perm())
		}
	}
	if _, err := os.Stat(path + ".3"); err == nil {
		t.Error("a third rotated file is kept")
	}
	// An outside rotator moves the file; Reopen starts a new one.
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("after\n"))
	l.Close()
	if b, _ := os.ReadFile(path); string(b) != "after\n" {
		t.Errorf("after reopen the file holds %q", b)
	}
	if _, err := OpenLogFile(path, 10, 0); err == nil {
		t.Error("a size with no file kept was accepted")
	}
}
