package seal

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// KeyFileMode is the mode of a key file: its owner's alone.
const KeyFileMode = 0o600

// Load reads the key file at path, creating it with a fresh random key
// (mode 0600) when there is none. An existing file is tightened to 0600
// if it was more open; one that is not a regular file of KeySize bytes is
// refused (a truncated key would seal nothing anyone could open again).
func Load(path string) (*Key, error) {
	k, err := read(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return k, err
	}
	if err := create(path); err != nil {
		return nil, err
	}
	return read(path)
}

// read opens an existing key file without following a symlink.
func read(path string) (*Key, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the seal key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("opening the seal key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("the seal key %s is not a regular file", path)
	}
	if fi.Mode().Perm() != KeyFileMode {
		if err := f.Chmod(KeyFileMode); err != nil {
			return nil, fmt.Errorf("tightening the seal key's mode: %w", err)
		}
	}
	raw := make([]byte, KeySize+1)
	n, err := io.ReadFull(f, raw)
	if err != io.ErrUnexpectedEOF || n != KeySize {
		return nil, fmt.Errorf("the seal key %s is not %d bytes", path, KeySize)
	}
	return New(raw[:KeySize])
}

// create writes a new key beside path and links it into place, so a
// reader never sees a partial key and two creators agree on one.
func create(path string) error {
	var raw [KeySize]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".seal-key-*")
	if err != nil {
		return fmt.Errorf("creating the seal key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(raw[:])
	if err == nil {
		err = tmp.Chmod(KeyFileMode) // CreateTemp's 0600, whatever the umask
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("creating the seal key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating the seal key: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
