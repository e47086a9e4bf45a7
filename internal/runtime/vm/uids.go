package vm

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Each sandbox's QEMU runs as a uid of its own (from its start: launch),
// so that a compromised QEMU cannot signal, trace or read another
// sandbox's. The
// uids come from a range no distribution or subuid allocation uses; a
// file <state>/uids/<uid> holding the sandbox id reserves one.
const (
	uidBase  = 0x7A000000
	uidCount = 1 << 16
)

func (r *Runtime) uidsDir() string { return filepath.Join(r.cfg.StateDir, "uids") }

// allocUID reserves a uid for the sandbox id, starting from one derived
// from the id and probing onwards.
func (r *Runtime) allocUID(id string) (int, error) {
	if err := os.MkdirAll(r.uidsDir(), 0o700); err != nil {
		return 0, err
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	start := int(h.Sum32() % uidCount)
	for i := range uidCount {
		uid := uidBase + (start+i)%uidCount
		f, err := os.OpenFile(filepath.Join(r.uidsDir(), strconv.Itoa(uid)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			if held, _ := os.ReadFile(filepath.Join(r.uidsDir(), strconv.Itoa(uid))); string(held) == id {
				return uid, nil
			}
			continue
		}
		if err != nil {
			return 0, err
		}
		_, err = f.WriteString(id)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return uid, err
	}
	return 0, fmt.Errorf("no free QEMU uid among %d", uidCount)
}

// releaseUIDs frees every uid the sandbox id holds (a failed start may
// hold one it never recorded).
func (r *Runtime) releaseUIDs(id string) error {
	entries, err := os.ReadDir(r.uidsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		path := filepath.Join(r.uidsDir(), e.Name())
		if held, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(held)) == id {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
