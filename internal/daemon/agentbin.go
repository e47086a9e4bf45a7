package daemon

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// installAgent copies the running binary (which is also the agent) to
// <state>/agent/corral-<hash>, where sandboxes bind it read-only. Copying
// decouples running sandboxes from upgrades of the installed binary, and
// the hash keeps every version a snapshot may still need.
func installAgent(stateDir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating own binary: %w", err)
	}
	if err := checkStatic(self); err != nil {
		return "", err
	}
	f, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	dir := filepath.Join(stateDir, "agent")
	dst := filepath.Join(dir, "corral-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".agent-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, f); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp.Name(), dst)
}

// checkStatic refuses a dynamically linked binary: it could not run inside
// a sandbox whose root filesystem has other (or no) libraries.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build corral with CGO_ENABLED=0", path)
		}
	}
	return nil
}
