package tarx

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"corral/internal/errdefs"

	"golang.org/x/sys/unix"
)

// Default limits, used for each zero field of Limits.
const (
	DefaultMaxBytes   int64 = 16 << 30
	DefaultMaxEntries       = 1 << 20
	DefaultMaxRatio         = 200
	DefaultMaxPathLen       = 4096
)

// ratioSlack is the expansion every gzip stream gets on top of MaxRatio, so
// that tiny, very compressible layers (a few empty files are mostly zero
// padding) pass. A bomb is still refused after at most this much output
// beyond the ratio.
const ratioSlack = 1 << 20

// Limits bounds what one layer may expand to. A zero field takes its default.
type Limits struct {
	// MaxBytes bounds the total size of the regular files extracted
	// (default 16 GiB).
	MaxBytes int64
	// MaxEntries bounds the number of tar entries (default 1<<20).
	MaxEntries int
	// MaxRatio bounds, for gzip input, the bytes produced per compressed
	// byte read (default 200).
	MaxRatio int
	// MaxPathLen bounds the length of entry names and link targets
	// (default 4096).
	MaxPathLen int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = DefaultMaxRatio
	}
	if l.MaxPathLen <= 0 {
		l.MaxPathLen = DefaultMaxPathLen
	}
	return l
}

// Stats describes what Extract wrote.
type Stats struct {
	// Entries is the number of tar entries read, whiteouts included.
	Entries int
	// Bytes is the total size of the regular files written.
	Bytes int64
}

// Extract reads a layer (plain tar or gzip, detected by magic bytes) from r
// and writes it under dst, which must be an empty directory. See the package
// documentation for what it refuses. On error, dst may hold part of the
// layer; the caller removes it.
func Extract(ctx context.Context, r io.Reader, dst string, lim Limits) (Stats, error) {
	lim = lim.withDefaults()
	root, err := openRoot(dst)
	if err != nil {
		return Stats{}, err
	}
	defer root.Close()

	src := &countReader{r: r}
	x := &extractor{
		root:    int(root.Fd()),
		lim:     lim,
		src:     src,
		isRoot:  os.Geteuid() == 0,
		regular: map[string]bool{},
		dirs:    map[string]dirMeta{},
		buf:     make([]byte, 128<<10),
	}
	in, err := x.decompress(src)
	if err != nil {
		return x.stats, err
	}
	if err := x.run(ctx, tar.NewReader(in)); err != nil {
		return x.stats, err
	}
	return x.stats, nil
}

// openRoot opens dst and checks that it is an empty directory.
func openRoot(dst string) (*os.File, error) {
	f, err := os.OpenFile(dst, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("opening layer directory: %w", err)
	}
	names, err := f.Readdirnames(1)
	if err != nil && err != io.EOF {
		f.Close()
		return nil, fmt.Errorf("reading layer directory: %w", err)
	}
	if len(names) > 0 {
		f.Close()
		return nil, fmt.Errorf("%w: layer directory %s is not empty", errdefs.ErrFailedPrecondition, dst)
	}
	return f, nil
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// decompress detects the compression of the stream from its magic bytes.
func (x *extractor) decompress(src *countReader) (io.Reader, error) {
	br := bufio.NewReaderSize(src, 32<<10)
	magic, _ := br.Peek(len(zstdMagic))
	if src.err != nil {
		return nil, fmt.Errorf("reading layer: %w", src.err)
	}
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, x.readErr("", err)
		}
		return &ratioReader{r: gz, src: src, ratio: int64(x.lim.MaxRatio)}, nil
	case bytes.HasPrefix(magic, zstdMagic):
		return nil, fmt.Errorf("%w: zstd-compressed layers", errdefs.ErrNotSupported)
	}
	return br, nil
}

// readErr classifies an error met while reading the archive: the source's
// own failure is returned as it is; anything else is the archive's fault.
func (x *extractor) readErr(name string, err error) error {
	if x.src.err != nil {
		return fmt.Errorf("reading layer: %w", x.src.err)
	}
	what := "layer"
	if name != "" {
		what = fmt.Sprintf("entry %q", name)
	}
	if errors.Is(err, errBomb) {
		return errdefs.Invalid(what, "gzip data expands more than %d times", x.lim.MaxRatio)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return errdefs.Invalid(what, "malformed archive: %v", err)
}

// countReader counts the bytes read from the source and remembers its first
// failure, so that a network error is not reported as a malformed archive.
type countReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

var errBomb = errors.New("gzip expansion ratio exceeded")

// ratioReader fails once the decompressed stream has produced more than
// ratio times the compressed bytes read so far (plus ratioSlack).
type ratioReader struct {
	r     io.Reader
	src   *countReader
	ratio int64
	out   int64
}

func (r *ratioReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.out += int64(n)
	allowed := int64(math.MaxInt64)
	if r.src.n <= (math.MaxInt64-ratioSlack)/r.ratio {
		allowed = r.src.n*r.ratio + ratioSlack
	}
	if r.out > allowed {
		return 0, errBomb
	}
	return n, err
}
