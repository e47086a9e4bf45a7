// Package volume owns named volumes: data that outlives sandboxes. Each
// volume is a sparse ext4 image of a fixed size (<state>/volumes/<name>/
// disk.img), so a full volume is ENOSPC inside its own file system and
// never touches the rest of the host's disk. The host loop-mounts the
// image (mnt/) for every sandbox and for the host-side file calls: gVisor
// sandboxes bind it (served by the gofer), vm guests mount it over NFS
// from the daemon (package nfsd, mount.go).
//
// The store knows nothing of sandboxes: which sandboxes use a volume is
// the manager's business. It imports errdefs and the sandbox contract only.
package volume

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// Sizes, in GiB.
const (
	DefaultSizeGiB = 1
	MaxSizeGiB     = 1024
)

// Names inside a volume's directory.
const (
	metaFile  = "volume.json"
	imageFile = "disk.img"
	mountDir  = "mnt"
)

// CheckName returns an invalid-argument error naming field unless n can
// name a volume (sandbox.CheckVolumeName: one safe path component).
func CheckName(field, n string) error { return sandbox.CheckVolumeName(field, n) }

// Volume is one volume's record.
type Volume struct {
	Name      string    `json:"name"`
	SizeGiB   int64     `json:"size_gib"`
	CreatedAt time.Time `json:"created_at"`
}

// Store is the volumes under one directory.
type Store struct {
	dir string
	log *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Open returns the store under dir, creating it (0700) if needed, and
// removes what an interrupted create left behind.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("volume store: %w", err)
	}
	if tmps, err := filepath.Glob(filepath.Join(dir, ".tmp-*")); err == nil {
		for _, t := range tmps {
			_ = os.RemoveAll(t)
		}
	}
	return &Store{dir: dir, log: log, locks: map[string]*sync.Mutex{}}, nil
}

// Lock serialises the operations on one volume (create, remove, mount
// changes, host file calls); the caller calls the returned unlock.
func (s *Store) Lock(name string) func() {
	s.mu.Lock()
	l := s.locks[name]
	if l == nil {
		l = &sync.Mutex{}
		s.locks[name] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (s *Store) path(name string, parts ...string) string {
	return filepath.Join(append([]string{s.dir, name}, parts...)...)
}

// Create makes volume name of sizeGiB (0: DefaultSizeGiB): an image
// with an ext4 file system, made in a temporary directory and
// renamed into place, so a crash leaves the volume whole or absent.
func (s *Store) Create(ctx context.Context, name string, sizeGiB int64) (Volume, error) {
	if err := CheckName("name", name); err != nil {
		return Volume{}, err
	}
	if sizeGiB == 0 {
		sizeGiB = DefaultSizeGiB
	}
	if sizeGiB < 0 || sizeGiB > MaxSizeGiB {
		return Volume{}, errdefs.Invalid("size_gib", "must be between 1 and %d, got %d", MaxSizeGiB, sizeGiB)
	}
	unlock := s.Lock(name)
	defer unlock()
	if _, err := os.Stat(s.path(name)); err == nil {
		return Volume{}, fmt.Errorf("%w: volume %q exists", errdefs.ErrAlreadyExists, name)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.dir, ".tmp-"+name+"-"+hex.EncodeToString(rnd[:]))
	if err := os.MkdirAll(filepath.Join(tmp, mountDir), 0o700); err != nil {
		return Volume{}, err
	}
	defer os.RemoveAll(tmp)
	if err := mkfs(ctx, filepath.Join(tmp, imageFile), sizeGiB); err != nil {
		return Volume{}, fmt.Errorf("creating volume %q: %w", name, err)
	}
	v := Volume{Name: name, SizeGiB: sizeGiB, CreatedAt: time.Now().UTC().Truncate(time.Second)}
	b, _ := json.Marshal(v)
	if err := writeSynced(filepath.Join(tmp, metaFile), b); err != nil {
		return Volume{}, err
	}
	if err := os.Rename(tmp, s.path(name)); err != nil {
		return Volume{}, fmt.Errorf("creating volume %q: %w", name, err)
	}
	syncDir(s.dir)
	s.log.Info("volume created", "op", "volume", "volume", name, "size_gib", sizeGiB)
	return v, nil
}

// mkfs makes path a file of sizeGiB holding an empty ext4 file
// system with no blocks reserved for root (the guest's root fills it to
// the last block); its root directory is root's, 0755, as a Docker
// volume's is.
func mkfs(ctx context.Context, path string, sizeGiB int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	// Allocated now, not sparse: the volume's size is the host disk it
	// takes from its creation on, so filling it takes nothing more and
	// volumes never promise more disk than the host has.
	err = unix.Fallocate(int(f.Fd()), 0, 0, sizeGiB<<30)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("%w: the host has no room for %d GiB", errdefs.ErrResourceExhausted, sizeGiB)
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-L", "corral-volume",
		"-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Get returns volume name's record; ErrNotFound if there is none.
func (s *Store) Get(name string) (Volume, error) {
	if err := CheckName("name", name); err != nil {
		return Volume{}, err
	}
	b, err := os.ReadFile(s.path(name, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Volume{}, fmt.Errorf("%w: volume %q", errdefs.ErrNotFound, name)
	}
	if err != nil {
		return Volume{}, err
	}
	var v Volume
	if err := json.Unmarshal(b, &v); err != nil {
		return Volume{}, fmt.Errorf("volume %q: reading its record: %w", name, err)
	}
	return v, nil
}

// List returns every volume, by name.
func (s *Store) List() ([]Volume, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	out := []Volume{}
	for _, e := range ents {
		if !e.IsDir() || CheckName("name", e.Name()) != nil {
			continue
		}
		v, err := s.Get(e.Name())
		if err != nil {
			s.log.Warn("volume unreadable", "op", "volume", "volume", e.Name(), "err", err)
			continue
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove unmounts and deletes volume name. The caller holds Lock(name)
// and has made sure no sandbox uses it.
func (s *Store) Remove(ctx context.Context, name string) error {
	if err := CheckName("name", name); err != nil {
		return err
	}
	if _, err := os.Stat(s.path(name)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: volume %q", errdefs.ErrNotFound, name)
	}
	if err := s.Unmount(ctx, name); err != nil {
		return err
	}
	// The record goes first: a crash midway leaves a directory that List
	// skips and a second Remove finishes.
	if err := os.Remove(s.path(name, metaFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.RemoveAll(s.path(name)); err != nil {
		return fmt.Errorf("removing volume %q: %w", name, err)
	}
	s.log.Info("volume removed", "op", "volume", "volume", name)
	return nil
}

// Image is the host path of volume name's disk image.
func (s *Store) Image(name string) string { return s.path(name, imageFile) }

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
