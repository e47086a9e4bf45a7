package volume

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
)

// The host-side file calls open every path with openat2(RESOLVE_IN_ROOT)
// from the volume's mount: a symlink or ".." that a sandbox left in the
// volume resolves inside it, never on the host, whatever a sandbox does
// meanwhile.

const resolveFlags = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// maxPath bounds a path argument (PATH_MAX).
const maxPath = 4096

// Entry is one directory entry of a volume.
type Entry struct {
	Name       string
	Path       string
	Type       string // file, dir, symlink, other
	Size       int64
	Mode       fs.FileMode
	ModifiedAt time.Time
	Target     string // a symlink's target, as stored
}

// CleanPath checks a path inside a volume and returns it cleaned and
// absolute ("/" for the root).
func CleanPath(p string) (string, error) {
	if p == "" {
		return "", errdefs.Invalid("path", "required")
	}
	if len(p) > maxPath || strings.IndexByte(p, 0) >= 0 {
		return "", errdefs.Invalid("path", "longer than %d bytes or holds a NUL byte", maxPath)
	}
	return path.Clean("/" + p), nil
}

func openIn(root, p string, flags int, mode uint32) (*os.File, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(rootFD)
	fd, err := unix.Openat2(rootFD, "."+rel, &unix.OpenHow{
		Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveFlags,
	})
	if err != nil {
		return nil, pathError(rel, err)
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// pathError classifies a failed file call on a volume path rel.
func pathError(rel string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: %s: no such file or directory", errdefs.ErrNotFound, rel)
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EISDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return errdefs.Invalid("path", "%s: %v", rel, err)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("%w: %s: the volume is full", errdefs.ErrResourceExhausted, rel)
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("%w: %s", errdefs.ErrAlreadyExists, rel)
	}
	return fmt.Errorf("%s: %w", rel, err)
}

// OpenFile opens regular file p of the volume mounted at root for
// reading.
func OpenFile(root, p string) (*os.File, os.FileInfo, error) {
	f, err := openIn(root, p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errdefs.Invalid("path", "%s is not a regular file", f.Name())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// WriteFile writes r to file p of the volume mounted at root (created
// with mode, or truncated; its parent directories made 0755 as needed)
// and returns its entry. A final symlink is refused, not followed.
func WriteFile(root, p string, r io.Reader, mode fs.FileMode) (Entry, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return Entry{}, err
	}
	if rel == "/" {
		return Entry{}, errdefs.Invalid("path", "/ is the volume's root directory")
	}
	if err := mkdirAll(root, path.Dir(rel)); err != nil {
		return Entry{}, err
	}
	f, err := openIn(root, rel, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_NONBLOCK, uint32(mode.Perm()))
	if err != nil {
		return Entry{}, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return Entry{}, errdefs.Invalid("path", "%s is not a regular file", rel)
	}
	_, err = io.Copy(f, r)
	var e Entry
	if err == nil {
		var fi fs.FileInfo
		if fi, err = f.Stat(); err == nil {
			e = Entry{Name: path.Base(rel), Path: rel, Type: "file", Size: fi.Size(), Mode: fi.Mode().Perm(), ModifiedAt: fi.ModTime().UTC()}
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return Entry{}, pathError(rel, pe.Err)
		}
		return Entry{}, fmt.Errorf("writing %s: %w", rel, err)
	}
	return e, nil
}

// mkdirAll makes directory dir (absolute, clean) and its parents inside
// root, one component at a time, each opened with RESOLVE_IN_ROOT.
func mkdirAll(root, dir string) error {
	cur := "/"
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		if part == "" {
			continue
		}
		parent, err := openIn(root, cur, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		err = unix.Mkdirat(int(parent.Fd()), part, 0o755)
		parent.Close()
		cur = path.Join(cur, part)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return pathError(cur, err)
		}
	}
	return nil
}

// ReadDir lists directory p of the volume mounted at root.
func ReadDir(root, p string) ([]Entry, error) {
	d, err := openIn(root, p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(names))
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(int(d.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		e := Entry{Name: n, Path: path.Join(d.Name(), n), Size: st.Size,
			Mode: fs.FileMode(st.Mode & 0o7777), ModifiedAt: time.Unix(st.Mtim.Unix()).UTC()}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			e.Type = "file"
		case syscall.S_IFDIR:
			e.Type = "dir"
		case syscall.S_IFLNK:
			e.Type = "symlink"
			buf := make([]byte, 4096)
			if k, err := unix.Readlinkat(int(d.Fd()), n, buf); err == nil {
				e.Target = string(buf[:k])
			}
		default:
			e.Type = "other"
		}
		out = append(out, e)
	}
	return out, nil
}
