package store

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"corral/internal/cleanup"
	"corral/internal/errdefs"
	"corral/internal/image/tarx"
)

// Layer describes one extracted layer.
type Layer struct {
	// Digest is the sha256 of the uncompressed tar stream (the diffID).
	Digest Digest
	// Size is the approximate bytes on disk: the sum of file sizes.
	Size int64
	// Entries is the number of tar entries.
	Entries int
	// Created is when the layer was added to this store.
	Created time.Time
}

// layerRecord is layer.json.
type layerRecord struct {
	Schema  int       `json:"schema"`
	Digest  Digest    `json:"digest"`
	Size    int64     `json:"size"`
	Entries int       `json:"entries"`
	Created time.Time `json:"created"`
}

// maxTrailing bounds the bytes after the tar's end-of-archive marker (they
// are part of the diffID, and tar writers pad to a record).
const maxTrailing = 1 << 20

// AddLayer extracts the tar stream r (plain or gzip) into the store and
// returns its layer. The digest is that of the uncompressed stream.
//
// When expect is set it is checked against the content (a mismatch is
// ErrInvalidArgument and leaves nothing behind), and a layer already in the
// store under that digest is returned without reading r. Concurrent calls
// for one expected digest extract it once; without an expected digest each
// call extracts, and all but the first to finish discard their copy.
func (s *Store) AddLayer(ctx context.Context, r io.Reader, expect Digest) (Layer, error) {
	return s.addLayer(ctx, r, expect, false)
}

// AddLayerAs extracts the layer tar r and records it as layer d without
// checking that r hashes to d: r is a layer another store regenerated
// from its copy of d (ExportLayer), whose bytes differ from the original
// tar d was taken of. The caller vouches for d (a cluster node fetching
// by an image digest it verified). A layer already stored as d is
// returned without reading r.
func (s *Store) AddLayerAs(ctx context.Context, r io.Reader, d Digest) (Layer, error) {
	if d == "" {
		return Layer{}, errdefs.Invalid("layer", "no digest to store it as")
	}
	return s.addLayer(ctx, r, d, true)
}

func (s *Store) addLayer(ctx context.Context, r io.Reader, expect Digest, vouched bool) (Layer, error) {
	if expect != "" {
		if _, err := ParseDigest(string(expect)); err != nil {
			return Layer{}, fmt.Errorf("adding layer: %w", err)
		}
		unlock := s.lockDigest(expect)
		defer unlock()
		if l, err := s.readLayer(expect); err == nil {
			return l, nil
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return Layer{}, fmt.Errorf("adding layer %s: %w", expect, err)
		}
	}
	c := cleanup.Make(ctx)
	defer c.Clean()
	tmp, err := os.MkdirTemp(s.path("tmp"), "layer-")
	if err != nil {
		return Layer{}, fmt.Errorf("adding layer: %w", err)
	}
	c.Add(func(context.Context) {
		if err := os.RemoveAll(tmp); err != nil {
			s.log.Warn("removing unfinished layer", "op", "add-layer", "dir", tmp, "err", err)
		}
	})
	fsDir := filepath.Join(tmp, "fs")
	if err := os.Mkdir(fsDir, 0o755); err != nil {
		return Layer{}, fmt.Errorf("adding layer: %w", err)
	}
	d, st, err := extractHashed(ctx, r, fsDir)
	if err != nil {
		return Layer{}, fmt.Errorf("adding layer: %w", err)
	}
	if vouched {
		d = expect
	}
	if expect != "" && d != expect {
		return Layer{}, fmt.Errorf("%w: adding layer: content is %s, expected %s", errdefs.ErrInvalidArgument, d, expect)
	}
	if expect == "" {
		unlock := s.lockDigest(d)
		defer unlock()
	}
	rec := layerRecord{Schema: 1, Digest: d, Size: st.Bytes, Entries: st.Entries, Created: time.Now().UTC()}
	if err := writeJSONAtomic(filepath.Join(tmp, "layer.json"), rec); err != nil {
		return Layer{}, fmt.Errorf("adding layer %s: %w", d, err)
	}
	// The layer's files must be on disk before the directory is visible.
	if err := syncTree(fsDir); err != nil {
		return Layer{}, fmt.Errorf("adding layer %s: syncing: %w", d, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if l, err := s.readLayer(d); err == nil {
		return l, nil // someone else finished first; c.Clean drops ours
	}
	final := s.layerDir(d)
	if err := os.Rename(tmp, final); err != nil {
		return Layer{}, fmt.Errorf("adding layer %s: %w", d, err)
	}
	c.Release()
	if err := syncDir(filepath.Dir(final)); err != nil {
		return Layer{}, fmt.Errorf("adding layer %s: %w", d, err)
	}
	s.log.Debug("layer added", "op", "add-layer", "layer", d, "entries", st.Entries, "bytes", st.Bytes)
	return rec.layer(), nil
}

// extractHashed decompresses r if it is gzip, extracts it into dst and
// returns the sha256 of the whole uncompressed stream.
func extractHashed(ctx context.Context, r io.Reader, dst string) (Digest, tarx.Stats, error) {
	src := &countingReader{r: r}
	br := bufio.NewReader(src)
	var plain io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return "", tarx.Stats{}, errdefs.Invalid("layer", "bad gzip stream: %v", err)
		}
		defer zr.Close()
		// tarx sees the plain stream, so the store bounds gzip's expansion.
		plain = &ratioReader{r: zr, src: src}
	}
	h := sha256.New()
	tee := io.TeeReader(plain, h)
	st, err := tarx.Extract(ctx, tee, dst, tarx.Limits{})
	if err != nil {
		return "", st, fmt.Errorf("extracting: %w", err)
	}
	// The bytes after the end-of-archive marker belong to the diffID.
	n, err := io.Copy(io.Discard, io.LimitReader(tee, maxTrailing+1))
	if err != nil {
		return "", st, fmt.Errorf("reading layer: %w", err)
	}
	if n > maxTrailing {
		return "", st, errdefs.Invalid("layer", "more than %d bytes after the end of the tar archive", maxTrailing)
	}
	return Digest(digestPrefix + hex.EncodeToString(h.Sum(nil))), st, nil
}

// syncTree fsyncs every regular file and directory under dir.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && !e.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// Layer returns the layer d; ErrNotFound when absent.
func (s *Store) Layer(d Digest) (Layer, error) {
	if _, err := ParseDigest(string(d)); err != nil {
		return Layer{}, err
	}
	return s.readLayer(d)
}

// readLayer reads and validates layer.json of d.
func (s *Store) readLayer(d Digest) (Layer, error) {
	p := filepath.Join(s.layerDir(d), "layer.json")
	b, err := readBounded(p, maxRecord)
	if isNotExist(err) {
		return Layer{}, fmt.Errorf("%w: layer %s", errdefs.ErrNotFound, d)
	}
	if err != nil {
		return Layer{}, err
	}
	var rec layerRecord
	if err := decodeStrict(p, b, &rec); err != nil {
		return Layer{}, err
	}
	if rec.Schema != 1 || rec.Digest != d || rec.Size < 0 || rec.Entries < 0 {
		return Layer{}, fmt.Errorf("corrupt record %s: bad schema, digest or counts", p)
	}
	if fi, err := os.Lstat(filepath.Join(s.layerDir(d), "fs")); err != nil || !fi.IsDir() {
		return Layer{}, fmt.Errorf("corrupt layer %s: fs is not a directory", s.layerDir(d))
	}
	return rec.layer(), nil
}

func (r layerRecord) layer() Layer {
	return Layer{Digest: r.Digest, Size: r.Size, Entries: r.Entries, Created: r.Created}
}

// Layers lists the layers in the store.
func (s *Store) Layers() ([]Layer, error) {
	ents, err := os.ReadDir(s.path("layers", "sha256"))
	if err != nil {
		return nil, fmt.Errorf("listing layers: %w", err)
	}
	var out []Layer
	for _, e := range ents {
		d, err := ParseDigest(digestPrefix + e.Name())
		if err != nil {
			return nil, fmt.Errorf("listing layers: stray entry %s", filepath.Join(s.path("layers", "sha256"), e.Name()))
		}
		l, err := s.readLayer(d)
		if err != nil {
			return nil, fmt.Errorf("listing layers: %w", err)
		}
		out = append(out, l)
	}
	return out, nil
}

// Gzip expansion bounds: the output may exceed maxRatio times the
// compressed bytes read by at most ratioSlack (tiny layers are mostly zero
// padding). A bomb is refused after a few compressed megabytes.
const (
	maxRatio   = 200
	ratioSlack = 1 << 20
)

// countingReader counts the bytes read from the source and remembers its
// first failure other than io.EOF.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// ratioReader reads the decompressed stream. It refuses a gzip bomb, and
// marks the decompressor's own failures (a corrupt or cut stream) as
// invalid input, as tarx does for a plain tar; a failure of the source
// underneath passes through as it is, so that a network error is not
// reported as a malformed layer.
type ratioReader struct {
	r   io.Reader
	src *countingReader
	out int64
}

func (r *ratioReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.out += int64(n)
	if r.out > r.src.n*maxRatio+ratioSlack {
		return n, errdefs.Invalid("layer", "gzip data expands more than %d times", maxRatio)
	}
	if err != nil && err != io.EOF && r.src.err == nil {
		return n, errdefs.Invalid("layer", "bad gzip stream: %v", err)
	}
	return n, err
}
