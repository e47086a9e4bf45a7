package tarx

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"corral/internal/errdefs"

	"golang.org/x/sys/unix"
)

const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
	paxXattr       = "SCHILY.xattr."
	maxID          = 1<<32 - 2 // (uid_t)-1 means "unchanged" to chown
)

// extractor holds the state of one Extract call.
type extractor struct {
	root   int // descriptor of dst, owned by Extract
	lim    Limits
	src    *countReader
	isRoot bool
	stats  Stats
	buf    []byte
	// regular holds the clean paths of the regular files (and hard links
	// to them) written so far: the only valid hard-link targets.
	regular map[string]bool
	// dirs holds the metadata applied to directories after the last entry.
	dirs map[string]dirMeta
}

type dirMeta struct {
	mode         uint32
	atime, mtime time.Time
}

func (x *extractor) run(ctx context.Context, tr *tar.Reader) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return x.readErr("", err)
		}
		if x.stats.Entries >= x.lim.MaxEntries {
			return refuse(hdr.Name, "layer has more than %d entries", x.lim.MaxEntries)
		}
		x.stats.Entries++
		if err := x.entry(ctx, tr, hdr); err != nil {
			return err
		}
	}
	return x.finishDirs()
}

// entry validates one header and dispatches on its type.
func (x *extractor) entry(ctx context.Context, tr *tar.Reader, hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // archive-wide PAX defaults; nothing to create
	}
	name, err := x.cleanName(hdr.Name, hdr.Name)
	if err != nil {
		return err
	}
	dir, base := split(name)
	if strings.HasPrefix(dir+"/", whiteoutPrefix) || strings.Contains(dir, "/"+whiteoutPrefix) {
		return refuse(hdr.Name, "whiteout prefix in a directory component")
	}
	if strings.HasPrefix(base, whiteoutPrefix) {
		return classify(hdr.Name, x.whiteout(hdr.Name, dir, base))
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
	case tar.TypeChar, tar.TypeBlock:
		return refuse(hdr.Name, "device nodes are not allowed in a layer")
	case tar.TypeFifo:
		return refuse(hdr.Name, "FIFOs are not allowed in a layer")
	default:
		return refuse(hdr.Name, "unsupported entry type %q", hdr.Typeflag)
	}
	if isSparse(hdr) {
		// archive/tar reads a GNU sparse file as a regular file of its
		// full size, zeros in the holes: a few bytes of layer could stand
		// for gigabytes of disk that no compression ratio check sees.
		return refuse(hdr.Name, "sparse files are not allowed in a layer")
	}
	if hdr.Uid < 0 || hdr.Uid > maxID || hdr.Gid < 0 || hdr.Gid > maxID {
		return refuse(hdr.Name, "owner %d:%d out of range", hdr.Uid, hdr.Gid)
	}
	if name == "." {
		if hdr.Typeflag != tar.TypeDir {
			return refuse(hdr.Name, "the layer root must be a directory")
		}
		return x.rootDir(hdr)
	}
	var target string
	if hdr.Typeflag == tar.TypeLink {
		if target, err = x.cleanName(hdr.Name, hdr.Linkname); err != nil {
			return err
		}
		if target == name {
			return refuse(hdr.Name, "hard link to itself")
		}
		if !x.regular[target] {
			return refuse(hdr.Name, "hard link target %q is not an earlier regular file of this layer", hdr.Linkname)
		}
	}
	if hdr.Typeflag == tar.TypeSymlink {
		if strings.IndexByte(hdr.Linkname, 0) >= 0 || len(hdr.Linkname) > x.lim.MaxPathLen || hdr.Linkname == "" {
			return refuse(hdr.Name, "symlink target is empty, too long or contains a NUL byte")
		}
	}
	if hdr.Typeflag == tar.TypeReg && (hdr.Size < 0 || hdr.Size > x.lim.MaxBytes-x.stats.Bytes) {
		return refuse(hdr.Name, "layer expands beyond %d bytes", x.lim.MaxBytes)
	}

	pfd, err := x.openDir(hdr.Name, dir, true)
	if err != nil {
		return classify(hdr.Name, err)
	}
	defer unix.Close(pfd)
	keepDir, err := x.clear(hdr.Name, pfd, base, hdr.Typeflag == tar.TypeDir)
	if err != nil {
		return classify(hdr.Name, err)
	}
	delete(x.regular, name)
	delete(x.dirs, name)

	switch hdr.Typeflag {
	case tar.TypeReg:
		err = x.file(ctx, tr, hdr, pfd, base)
		x.regular[name] = err == nil
	case tar.TypeDir:
		err = x.dir(hdr, pfd, base, keepDir)
		x.dirs[name] = meta(hdr)
	case tar.TypeSymlink:
		err = x.symlink(hdr, pfd, base)
	case tar.TypeLink:
		err = x.hardlink(hdr, target, pfd, base)
		x.regular[name] = err == nil
	}
	return classify(hdr.Name, err)
}

// classify gives an entry's failure its kind: a system call that failed
// because of what the layer asked for is the layer's fault (invalid), a
// full disk is resource_exhausted, and anything else the host's.
func classify(entry string, err error) error {
	switch {
	case err == nil || errdefs.Code(err) != "internal":
		return err
	case layerErrno(err):
		return refuse(entry, "%v", err)
	case errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("%w: entry %q: %w", errdefs.ErrResourceExhausted, truncateName(entry), err)
	}
	return fmt.Errorf("entry %q: %w", truncateName(entry), err)
}

// clear removes whatever an earlier entry left at base, except a directory
// that a directory entry replaces (keep is then true).
func (x *extractor) clear(entry string, pfd int, base string, isDir bool) (keep bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, err
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if isDir {
			return true, nil
		}
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(pfd, base, flags); err != nil {
		if err == unix.ENOTEMPTY || err == unix.EEXIST {
			return false, refuse(entry, "would replace a non-empty directory")
		}
		return false, fmt.Errorf("replacing: %w", err)
	}
	return false, nil
}

// file writes a regular file. It is created O_EXCL|O_NOFOLLOW (clear has
// removed any earlier entry), then owned, moded and given its xattrs in
// that order: chown clears setuid bits and capabilities.
func (x *extractor) file(ctx context.Context, tr *tar.Reader, hdr *tar.Header, pfd int, base string) error {
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := tr.Read(x.buf)
		if n > 0 {
			if _, err := f.Write(x.buf[:n]); err != nil {
				return err
			}
			x.stats.Bytes += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return x.readErr(hdr.Name, rerr)
		}
	}
	if err := x.chown(fd, hdr); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
		return err
	}
	if err := x.xattrs(fd, hdr); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return x.times(pfd, base, hdr.AccessTime, hdr.ModTime)
}

// dir creates a directory (0700 until finishDirs gives it its mode, so that
// its children can be written even when not root).
func (x *extractor) dir(hdr *tar.Header, pfd int, base string, exists bool) error {
	if !exists {
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
			return err
		}
	}
	fd, err := unix.Openat(pfd, base, dirFlags, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := x.chown(fd, hdr); err != nil {
		return err
	}
	return x.xattrs(fd, hdr)
}

// rootDir records the metadata of the layer root's own entry ("./").
func (x *extractor) rootDir(hdr *tar.Header) error {
	if err := x.chown(x.root, hdr); err != nil {
		return classify(hdr.Name, err)
	}
	x.dirs["."] = meta(hdr)
	return nil
}

func (x *extractor) symlink(hdr *tar.Header, pfd int, base string) error {
	if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
		return err
	}
	if x.isRoot {
		if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return x.times(pfd, base, hdr.AccessTime, hdr.ModTime)
}

// hardlink links base to target, which entry has checked is an earlier
// regular file; the check is repeated on the inode itself, and linkat is
// called without AT_SYMLINK_FOLLOW.
func (x *extractor) hardlink(hdr *tar.Header, target string, pfd int, base string) error {
	tdir, tbase := split(target)
	tfd, err := x.openDir(hdr.Name, tdir, false)
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	var st unix.Stat_t
	if err := unix.Fstatat(tfd, tbase, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return refuse(hdr.Name, "hard link target %q is not a regular file", hdr.Linkname)
	}
	return unix.Linkat(tfd, tbase, pfd, base, 0)
}

// whiteout turns an OCI whiteout entry into its overlayfs form.
func (x *extractor) whiteout(entry, dir, base string) error {
	pfd, err := x.openDir(entry, dir, true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if base == opaqueMarker {
		if err := unix.Fsetxattr(pfd, opaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("marking %q opaque: %w", dir, err)
		}
		return nil
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, whiteoutPrefix) {
		return refuse(entry, "invalid whiteout name %q", base)
	}
	if _, err := x.clear(entry, pfd, name, false); err != nil {
		return err
	}
	p := name
	if dir != "." {
		p = dir + "/" + name
	}
	delete(x.regular, p)
	delete(x.dirs, p)
	if err := unix.Mknodat(pfd, name, unix.S_IFCHR, 0); err != nil {
		return fmt.Errorf("creating whiteout: %w", err)
	}
	return nil
}

func (x *extractor) chown(fd int, hdr *tar.Header) error {
	if !x.isRoot {
		return nil
	}
	return unix.Fchown(fd, hdr.Uid, hdr.Gid)
}

func (x *extractor) times(pfd int, base string, atime, mtime time.Time) error {
	if atime.IsZero() {
		atime = mtime
	}
	ts := []unix.Timespec{timespec(atime), timespec(mtime)}
	return unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func timespec(t time.Time) unix.Timespec {
	if t.IsZero() {
		return unix.Timespec{}
	}
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}

func meta(hdr *tar.Header) dirMeta {
	return dirMeta{mode: uint32(hdr.Mode & 0o7777), atime: hdr.AccessTime, mtime: hdr.ModTime}
}

// finishDirs gives directories their mode and times, deepest first, once
// nothing more will be created in them. A directory replaced since its entry
// is skipped.
func (x *extractor) finishDirs() error {
	paths := make([]string, 0, len(x.dirs))
	for p := range x.dirs {
		paths = append(paths, p)
	}
	depth := func(p string) int {
		if p == "." {
			return -1
		}
		return strings.Count(p, "/")
	}
	sort.Slice(paths, func(i, j int) bool { return depth(paths[i]) > depth(paths[j]) })
	for _, p := range paths {
		m := x.dirs[p]
		dir, base := split(p)
		if p == "." {
			dir, base = ".", "."
		}
		pfd, err := x.openDir(p, dir, false)
		if err != nil {
			continue // replaced since; nothing of ours to finish
		}
		err = x.finishDir(pfd, base, m)
		unix.Close(pfd)
		if err != nil {
			return classify(p, err)
		}
	}
	return nil
}

func (x *extractor) finishDir(pfd int, base string, m dirMeta) error {
	fd, err := unix.Openat(pfd, base, dirFlags, 0)
	if err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, m.mode); err != nil {
		return err
	}
	return x.times(pfd, base, m.atime, m.mtime)
}

// isSparse reports whether hdr is a GNU sparse file in one of the PAX
// forms (the old GNU form has a type of its own, refused above).
func isSparse(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}
