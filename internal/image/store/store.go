package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"corral/internal/keylimit"
)

// Limits on what the store accepts and reads back.
const (
	// MaxLayers bounds the layers of one image.
	MaxLayers = 128
	// maxRecord bounds a layer or image record read from disk.
	maxRecord = 1 << 20
	// maxTagsFile bounds tags.json.
	maxTagsFile = 16 << 20
	// defaultGrace protects layers and untagged images this young from
	// Prune, so a build that has added layers but not yet written and
	// tagged its image does not lose them to a concurrent prune.
	defaultGrace = 10 * time.Minute
)

// Store is the image store rooted at one directory. It is safe for
// concurrent use.
type Store struct {
	root  string
	log   *slog.Logger
	grace time.Duration

	// mu serialises metadata: tags, image records, leases, mounts, the
	// final rename of a layer and Prune.
	mu sync.Mutex

	// layerLocks are the per-digest locks that make concurrent AddLayer
	// calls of one digest extract it once.
	layerLocks keylimit.Mutex
}

// Open opens (creating if needed) the store at root and discards any work
// left in <root>/tmp by an interrupted process.
func Open(root string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.Default()
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("opening image store %s: %w", root, err)
	}
	for _, d := range []string{"", "layers/sha256", "images/sha256", "leases", "mounts"} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o755); err != nil {
			return nil, fmt.Errorf("opening image store %s: %w", root, err)
		}
	}
	// Layers keep their setuid binaries: no unprivileged host user may
	// reach them.
	if err := os.Chmod(abs, 0o700); err != nil {
		return nil, fmt.Errorf("opening image store %s: %w", root, err)
	}
	// Mountinfo shows resolved paths; compare against the same.
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("opening image store %s: %w", root, err)
	}
	s := &Store{root: abs, log: log, grace: defaultGrace}
	if err := os.RemoveAll(s.path("tmp")); err != nil {
		return nil, fmt.Errorf("opening image store %s: clearing tmp: %w", root, err)
	}
	if err := os.Mkdir(s.path("tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("opening image store %s: %w", root, err)
	}
	if err := s.removeInterruptedWrites(); err != nil {
		return nil, fmt.Errorf("opening image store %s: %w", root, err)
	}
	if err := s.ensureMountpoints(); err != nil {
		return nil, fmt.Errorf("opening image store %s: %w", root, err)
	}
	return s, nil
}

// removeInterruptedWrites removes the temporary files of atomic writes
// (writeFileAtomic) a crash left in the record directories: nothing reads
// them, and each would stay on disk for good.
func (s *Store) removeInterruptedWrites() error {
	for _, d := range []string{"", "leases", "images/sha256", "buildcache"} {
		tmps, err := filepath.Glob(filepath.Join(s.path(d), ".tmp-*"))
		if err != nil {
			return err
		}
		for _, t := range tmps {
			if err := os.Remove(t); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("removing an interrupted write: %w", err)
			}
			s.log.Info("removed an interrupted write", "op", "open", "file", t)
		}
	}
	return nil
}

// Root returns the store's directory.
func (s *Store) Root() string { return s.root }

func (s *Store) path(elem ...string) string {
	return filepath.Join(append([]string{s.root}, elem...)...)
}

func (s *Store) layerDir(d Digest) string { return s.path("layers", "sha256", d.Hex()) }
func (s *Store) imagePath(d Digest) string {
	return s.path("images", "sha256", d.Hex()+".json")
}

// lockDigest takes the per-digest lock; the returned func releases it.
func (s *Store) lockDigest(d Digest) func() { return s.layerLocks.Lock(string(d)) }

// writeFileAtomic writes data to path through a synced temporary file in the
// same directory and a rename, then syncs the directory.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return syncDir(dir)
}

func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'), 0o644)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readBounded reads at most limit bytes of path; a longer file is corrupt.
// A missing file is returned as os.ErrNotExist unwrapped by the caller.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("corrupt record %s: larger than %d bytes", path, limit)
	}
	return b, nil
}

// decodeStrict decodes one JSON value, refusing unknown fields and trailing
// data.
func decodeStrict(path string, b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("corrupt record %s: %w", path, err)
	}
	if dec.More() {
		return fmt.Errorf("corrupt record %s: trailing data", path)
	}
	return nil
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
