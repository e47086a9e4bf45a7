package dirtar

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"corral/internal/errdefs"
)

// NormalTime is the modification time of every entry written with
// Options.Normalize, and of the parent directories of dst in any mode.
var NormalTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// MaxSkippedNames bounds Stats.Skipped; Stats.SkippedCount counts them all.
const MaxSkippedNames = 20

// Options says how Write records metadata.
type Options struct {
	// Normalize writes every entry as owned by 0:0, with the time
	// NormalTime and no extended attributes, so that the tar depends on
	// the names, modes, links and contents alone (a build's copy steps
	// use its digest as a cache key).
	Normalize bool
	// Overlay says the tree is an overlayfs upper directory (a vm guest's
	// writable layer): its whiteouts, 0/0 character devices, are written
	// as such instead of skipped, and directories keep the
	// trusted.overlay.opaque attribute, so that overlaytar can turn both
	// into OCI whiteouts. Other device nodes and FIFOs are written too
	// (headers only), as gVisor's export writes them, so that overlaytar
	// can name what it leaves out; sockets, which a tar cannot hold, are
	// skipped.
	Overlay bool
}

// Stats describes what Write wrote.
type Stats struct {
	// Entries is the number of tar entries written, the parents of dst
	// included.
	Entries int
	// Bytes is the total size of the regular files' contents written
	// (hard links count once).
	Bytes int64
	// Skipped holds the entry names (as written, without a leading "/") of
	// the first MaxSkippedNames device nodes, sockets and FIFOs left out.
	Skipped []string
	// SkippedCount is the number of entries left out, listed or not.
	SkippedCount int
}

// Write writes src (a regular file or a directory, never a symlink) to w as
// a complete tar whose entries sit at dst, an absolute path. See the
// package documentation for the rules. w is not closed.
func Write(w io.Writer, src, dst string, opts Options) (Stats, error) {
	name, err := cleanDst(dst)
	if err != nil {
		return Stats{}, err
	}
	fi, err := os.Lstat(src)
	if err != nil {
		return Stats{}, fmt.Errorf("tarring %s: %w", src, err)
	}
	tw := tar.NewWriter(w)
	wr := &writer{tw: tw, opts: opts, links: map[fileID]string{}}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return Stats{}, errdefs.Invalid("src", "%s is a symlink; name its target instead", src)
	case fi.IsDir():
		err = wr.tree(src, name, fi)
	case fi.Mode().IsRegular():
		if strings.HasSuffix(dst, "/") {
			name = path.Join(name, filepath.Base(src))
		}
		err = wr.file(src, name, fi)
	default:
		return Stats{}, errdefs.Invalid("src", "%s is not a regular file or a directory", src)
	}
	if err != nil {
		return wr.stats, fmt.Errorf("tarring %s: %w", src, err)
	}
	if err := tw.Close(); err != nil {
		return wr.stats, fmt.Errorf("tarring %s: finishing the archive: %w", src, err)
	}
	return wr.stats, nil
}

// cleanDst checks that dst is absolute and returns it cleaned, as an entry
// name: without the leading "/", and "" for the root.
func cleanDst(dst string) (string, error) {
	if !path.IsAbs(dst) {
		return "", errdefs.Invalid("dst", "%q is not an absolute path", dst)
	}
	if strings.ContainsRune(dst, 0) {
		return "", errdefs.Invalid("dst", "%q holds a NUL byte", dst)
	}
	return strings.TrimPrefix(path.Clean(dst), "/"), nil
}
