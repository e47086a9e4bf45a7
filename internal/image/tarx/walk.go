package tarx

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"

	"corral/internal/errdefs"

	"golang.org/x/sys/unix"
)

// dirFlags opens a directory for use as the dirfd of *at calls. O_RDONLY
// rather than O_PATH, because fsetxattr (the opaque marker) needs a real
// descriptor.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// noOpenat2 is set once openat2 proves unavailable (old kernel, seccomp),
// after which parents are always opened by walking.
var noOpenat2 atomic.Bool

const maxNameInError = 256

// refuse returns the error for an entry the archive may not contain.
// Hostile names can be PATH_MAX long; the message keeps their start.
func refuse(name, format string, args ...any) error {
	if len(name) > maxNameInError {
		name = name[:maxNameInError] + "..."
	}
	return errdefs.Invalid(fmt.Sprintf("entry %q", name), format, args...)
}

// cleanName turns an archive name (entry or hard-link target) into a clean
// path relative to the root: "." for the root itself, never starting with
// "/" or "..". A leading "/" is dropped; climbing above the root is refused.
func (x *extractor) cleanName(entry, name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", refuse(entry, "name contains a NUL byte")
	}
	if len(name) > x.lim.MaxPathLen {
		return "", refuse(entry, "name longer than %d bytes", x.lim.MaxPathLen)
	}
	if name == "" {
		return "", refuse(entry, "empty name")
	}
	p := path.Clean(strings.TrimLeft(name, "/"))
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", refuse(entry, "%q escapes the layer directory", name)
	}
	return p, nil
}

// split returns the parent directory and the last component of a clean path.
func split(p string) (dir, base string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ".", p
	}
	return p[:i], p[i+1:]
}

// openDir returns a descriptor of directory p (clean, relative to the root),
// opened without following any symlink. With create, missing components are
// created (mode 0755, like docker's implicit parents). entry names the tar
// entry in errors.
func (x *extractor) openDir(entry, p string, create bool) (int, error) {
	if p == "." {
		return unix.Openat(x.root, ".", dirFlags, 0)
	}
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(x.root, p, &unix.OpenHow{
			Flags:   dirFlags,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err == nil {
			return fd, nil
		}
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			noOpenat2.Store(true)
		}
		// Anything else (a missing component, a symlink): the walk
		// creates what is missing and names what is wrong.
	}
	return x.walk(entry, p, create)
}

// walk opens p one component at a time with O_NOFOLLOW, so that no symlink
// is ever followed, whatever the kernel.
func (x *extractor) walk(entry, p string, create bool) (int, error) {
	fd, err := unix.Openat(x.root, ".", dirFlags, 0)
	if err != nil {
		return -1, err
	}
	comps := strings.Split(p, "/")
	for i, c := range comps {
		next, err := unix.Openat(fd, c, dirFlags, 0)
		if err == unix.ENOENT && create {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil || err == unix.EEXIST {
				next, err = unix.Openat(fd, c, dirFlags, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			prefix := strings.Join(comps[:i+1], "/")
			switch err {
			case unix.ELOOP, unix.ENOTDIR:
				return -1, refuse(entry, "%q is a symlink or not a directory", prefix)
			case unix.ENOENT:
				return -1, refuse(entry, "%q does not exist", prefix)
			}
			return -1, fmt.Errorf("opening %q: %w", truncateName(prefix), err)
		}
		fd = next
	}
	return fd, nil
}
