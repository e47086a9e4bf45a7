// Package nfsd serves one volume's host mount over NFSv3 to one vm guest
// (github.com/willscott/go-nfs over the billy file system of this
// package). Every path a guest names is resolved inside the volume with
// openat2(RESOLVE_IN_ROOT): a symlink or ".." a sandbox left there never
// leads out of it. A read-only export refuses every change here, in the
// server, whatever the guest's own mount options say.
//
// It imports no Corral package but oomscore (its child's OOM score): the
// manager wires one Server per mount of a vm sandbox to the streams its
// agent relays (docs/ARCHITECTURE.md, "Volumes on vm").
package nfsd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	billy "github.com/go-git/go-billy/v5"
	"golang.org/x/sys/unix"
)

const resolveFlags = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// maxPath bounds a path (PATH_MAX).
const maxPath = 4096

// FS is a billy.Filesystem (and billy.Change) over one directory.
type FS struct {
	rootFD   int
	rootPath string
	readOnly bool
}

// NewFS opens root (a directory the caller owns, a volume's host mount)
// for serving; readOnly refuses every change. Close releases it.
func NewFS(root string, readOnly bool) (*FS, error) {
	// The kernel's name for an inode (handle.go) is below the real path.
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", root, err)
	}
	// Not O_PATH: open_by_handle_at takes it as its mount fd.
	fd, err := unix.Open(real, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", root, err)
	}
	return &FS{rootFD: fd, rootPath: real, readOnly: readOnly}, nil
}

// Close releases the root.
func (f *FS) Close() error { return unix.Close(f.rootFD) }

// ReadOnly reports whether f refuses changes.
func (f *FS) ReadOnly() bool { return f.readOnly }

// clean turns a billy path into one relative to the root ("." for it).
func clean(p string) (string, error) {
	if len(p) > maxPath || strings.IndexByte(p, 0) >= 0 {
		return "", &os.PathError{Op: "resolve", Path: p, Err: syscall.ENAMETOOLONG}
	}
	c := path.Clean("/" + p)
	if c == "/" {
		return ".", nil
	}
	return c[1:], nil
}

func (f *FS) roErr(op, p string) error {
	return &os.PathError{Op: op, Path: p, Err: syscall.EROFS}
}

// openIn opens p inside the root, following symlinks inside it.
func (f *FS) openIn(p string, flags int, mode uint32) (int, error) {
	rel, err := clean(p)
	if err != nil {
		return -1, err
	}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 {
		mode = 0 // openat2 refuses a mode it would not use
	}
	fd, err := unix.Openat2(f.rootFD, rel, &unix.OpenHow{
		Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveFlags,
	})
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// parent opens p's directory inside the root and returns it with p's
// last name ("" for the root itself). The caller closes the fd.
func (f *FS) parent(p string) (int, string, error) {
	rel, err := clean(p)
	if err != nil {
		return -1, "", err
	}
	if rel == "." {
		fd, err := unix.Dup(f.rootFD)
		return fd, "", err
	}
	fd, err := f.openIn(path.Dir(rel), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", err
	}
	return fd, path.Base(rel), nil
}

// Create makes or truncates file p.
func (f *FS) Create(p string) (billy.File, error) {
	return f.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open opens p for reading.
func (f *FS) Open(p string) (billy.File, error) { return f.OpenFile(p, os.O_RDONLY, 0) }

// OpenFile opens p, a regular file or a directory (never a FIFO, socket
// or device: O_NONBLOCK and a check after the open, so a guest's FIFO
// cannot stall the server).
func (f *FS) OpenFile(p string, flag int, perm fs.FileMode) (billy.File, error) {
	if f.readOnly && flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, f.roErr("open", p)
	}
	fd, err := f.openIn(p, flag|unix.O_NONBLOCK|unix.O_NOCTTY, uint32(perm.Perm()))
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: p, Err: syscall.EINVAL}
	}
	// Back to blocking mode for the regular file's reads and writes.
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return &file{File: os.NewFile(uintptr(fd), p), name: p}, nil
}

// Stat describes p, following symlinks inside the root.
func (f *FS) Stat(p string) (fs.FileInfo, error) {
	fd, err := f.openIn(p, unix.O_PATH, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	return newInfo(path.Base(p), &st), nil
}

// Lstat describes p itself.
func (f *FS) Lstat(p string) (fs.FileInfo, error) {
	dir, name, err := f.parent(p)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if name == "" {
		err = unix.Fstat(dir, &st)
	} else {
		err = unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return nil, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	return newInfo(path.Base(p), &st), nil
}

// Rename moves from to to, both inside the root.
func (f *FS) Rename(from, to string) error {
	if f.readOnly {
		return f.roErr("rename", from)
	}
	fd1, n1, err := f.parent(from)
	if err != nil {
		return err
	}
	defer unix.Close(fd1)
	fd2, n2, err := f.parent(to)
	if err != nil {
		return err
	}
	defer unix.Close(fd2)
	if n1 == "" || n2 == "" {
		return &os.PathError{Op: "rename", Path: from, Err: syscall.EBUSY}
	}
	if err := unix.Renameat(fd1, n1, fd2, n2); err != nil {
		return &os.PathError{Op: "rename", Path: from, Err: err}
	}
	return nil
}

// Remove removes file or empty directory p.
func (f *FS) Remove(p string) error {
	if f.readOnly {
		return f.roErr("remove", p)
	}
	dir, name, err := f.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if name == "" {
		return &os.PathError{Op: "remove", Path: p, Err: syscall.EBUSY}
	}
	err = unix.Unlinkat(dir, name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return &os.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}

// Join joins path elements.
func (f *FS) Join(elem ...string) string { return path.Join(elem...) }

// TempFile is not served (the NFS server never asks for one).
func (f *FS) TempFile(dir, prefix string) (billy.File, error) {
	return nil, &os.PathError{Op: "tempfile", Path: dir, Err: syscall.ENOTSUP}
}

// MkdirAll makes directory p and any missing parents, never following a
// symlink on the way.
func (f *FS) MkdirAll(p string, perm fs.FileMode) error {
	if f.readOnly {
		return f.roErr("mkdir", p)
	}
	rel, err := clean(p)
	if err != nil {
		return err
	}
	dir, err := unix.Dup(f.rootFD)
	if err != nil {
		return err
	}
	if rel == "." {
		return unix.Close(dir)
	}
	for _, name := range strings.Split(rel, "/") {
		if err := unix.Mkdirat(dir, name, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(dir)
			return &os.PathError{Op: "mkdir", Path: p, Err: err}
		}
		next, err := unix.Openat(dir, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dir)
		if err != nil {
			return &os.PathError{Op: "mkdir", Path: p, Err: err}
		}
		dir = next
	}
	return unix.Close(dir)
}

// ReadDir lists directory p; each entry is described by fstatat on the
// open directory, never by a path walked again.
func (f *FS) ReadDir(p string) ([]fs.FileInfo, error) {
	fd, err := f.openIn(p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(fd), p)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, &os.PathError{Op: "readdir", Path: p, Err: err}
	}
	out := make([]fs.FileInfo, 0, len(names))
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed meanwhile
		}
		out = append(out, newInfo(n, &st))
	}
	return out, nil
}

// Symlink makes link, a symlink to target (stored as given: it is only
// ever followed inside the root).
func (f *FS) Symlink(target, link string) error {
	if f.readOnly {
		return f.roErr("symlink", link)
	}
	dir, name, err := f.parent(link)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if name == "" {
		return &os.PathError{Op: "symlink", Path: link, Err: syscall.EEXIST}
	}
	if err := unix.Symlinkat(target, dir, name); err != nil {
		return &os.PathError{Op: "symlink", Path: link, Err: err}
	}
	return nil
}

// Readlink returns symlink p's target.
func (f *FS) Readlink(p string) (string, error) {
	dir, name, err := f.parent(p)
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	buf := make([]byte, maxPath)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: p, Err: err}
	}
	return string(buf[:n]), nil
}

// Chroot is not served.
func (f *FS) Chroot(p string) (billy.Filesystem, error) {
	return nil, &os.PathError{Op: "chroot", Path: p, Err: syscall.ENOTSUP}
}

// Root is the root's name inside the file system.
func (f *FS) Root() string { return "/" }

// Capabilities tell the NFS server what f allows: it answers ROFS to
// every change of a read-only export before calling f at all.
func (f *FS) Capabilities() billy.Capability {
	if f.readOnly {
		return billy.ReadCapability | billy.SeekCapability
	}
	return billy.DefaultCapabilities
}

// viaProc runs op on the "/proc/self/fd/N" name of p resolved inside the
// root: the kernel acts on the inode already found, not on a path walked
// again (chmod and utimes have no empty-path form for an O_PATH fd).
func (f *FS) viaProc(op, p string, do func(string) error) error {
	if f.readOnly {
		return f.roErr(op, p)
	}
	fd, err := f.openIn(p, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := do("/proc/self/fd/" + strconv.Itoa(fd)); err != nil {
		return &os.PathError{Op: op, Path: p, Err: errors.Unwrap(err)}
	}
	return nil
}

// Chmod sets p's permission bits.
func (f *FS) Chmod(p string, mode fs.FileMode) error {
	return f.viaProc("chmod", p, func(proc string) error {
		return os.Chmod(proc, mode.Perm()|mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	})
}

// Chtimes sets p's access and modification times.
func (f *FS) Chtimes(p string, atime, mtime time.Time) error {
	return f.viaProc("chtimes", p, func(proc string) error { return os.Chtimes(proc, atime, mtime) })
}

// Chown sets the owner of p, following symlinks inside the root.
func (f *FS) Chown(p string, uid, gid int) error {
	if f.readOnly {
		return f.roErr("chown", p)
	}
	fd, err := f.openIn(p, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "chown", Path: p, Err: err}
	}
	return nil
}

// Lchown sets the owner of p itself.
func (f *FS) Lchown(p string, uid, gid int) error {
	if f.readOnly {
		return f.roErr("lchown", p)
	}
	dir, name, err := f.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if name == "" {
		err = unix.Fchownat(dir, "", uid, gid, unix.AT_EMPTY_PATH)
	} else {
		err = unix.Fchownat(dir, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return &os.PathError{Op: "lchown", Path: p, Err: err}
	}
	return nil
}

// file is an open file of the volume. NFSv3 is mounted nolock: Lock and
// Unlock are never asked for and do nothing.
//
// The NFS library returns without closing a file whose Seek, Write or
// Truncate failed (a full volume's ENOSPC): the file closes itself then,
// or every failed write would leak a descriptor of the daemon, and the
// volume could never be unmounted.
type file struct {
	*os.File
	name string
}

func (f *file) Name() string  { return f.name }
func (f *file) Lock() error   { return nil }
func (f *file) Unlock() error { return nil }

func (f *file) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	if err != nil {
		f.File.Close()
	}
	return n, err
}

func (f *file) Seek(off int64, whence int) (int64, error) {
	n, err := f.File.Seek(off, whence)
	if err != nil {
		f.File.Close()
	}
	return n, err
}

func (f *file) Truncate(size int64) error {
	err := f.File.Truncate(size)
	if err != nil {
		f.File.Close()
	}
	return err
}

// info is an fs.FileInfo from a stat; Sys is the *syscall.Stat_t the NFS
// server reads inode numbers, owners and link counts from.
type info struct {
	name string
	st   syscall.Stat_t
}

func newInfo(name string, st *unix.Stat_t) *info {
	// unix.Stat_t and syscall.Stat_t are both the kernel's struct stat.
	return &info{name: name, st: *(*syscall.Stat_t)(unsafe.Pointer(st))}
}

func (i *info) Name() string       { return i.name }
func (i *info) Size() int64        { return i.st.Size }
func (i *info) ModTime() time.Time { return time.Unix(i.st.Mtim.Unix()) }
func (i *info) IsDir() bool        { return i.st.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func (i *info) Sys() any           { return &i.st }

func (i *info) Mode() fs.FileMode {
	m := fs.FileMode(i.st.Mode & 0o777)
	switch i.st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	}
	if i.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if i.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if i.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
