package nfsd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	billy "github.com/go-git/go-billy/v5"
	nfs "github.com/willscott/go-nfs"
	"golang.org/x/sys/unix"
)

// NFS file handles are the kernel's own (name_to_handle_at: for ext4 an
// inode number and generation), prefixed with their type: they stay
// valid across a rename and a daemon restart, and one volume's handle
// means nothing on another (open_by_handle_at decodes it against this
// volume's file system only). A handle is turned back into a path inside
// the root and checked again before use (fromHandle).

// maxCached bounds the handle-to-path cache of one export.
const maxCached = 1 << 16

// handler is the nfs.Handler of one export.
type handler struct {
	fs *FS

	mu    sync.Mutex
	paths map[string][]string
}

func newHandler(f *FS) *handler { return &handler{fs: f, paths: map[string][]string{}} }

// Mount answers every mount request with the export's root: a guest can
// only ever reach the one volume its relay stream belongs to.
func (h *handler) Mount(context.Context, net.Conn, nfs.MountRequest) (nfs.MountStatus, billy.Filesystem, []nfs.AuthFlavor) {
	return nfs.MountStatusOk, h.fs, []nfs.AuthFlavor{nfs.AuthFlavorNull}
}

// Change is the export's attribute changer (it refuses every change when
// read-only).
func (h *handler) Change(billy.Filesystem) billy.Change { return h.fs }

// FSStat reports the volume's own size and free space: the ext4 image's.
func (h *handler) FSStat(_ context.Context, _ billy.Filesystem, s *nfs.FSStat) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(h.fs.rootFD, &st); err != nil {
		return err
	}
	bs := uint64(st.Bsize)
	s.TotalSize, s.FreeSize, s.AvailableSize = st.Blocks*bs, st.Bfree*bs, st.Bavail*bs
	s.TotalFiles, s.FreeFiles, s.AvailableFiles = st.Files, st.Ffree, st.Ffree
	return nil
}

// ToHandle returns the handle of path (the entry itself, a symlink not
// followed); nil if it cannot be made.
func (h *handler) ToHandle(_ billy.Filesystem, p []string) []byte {
	name := strings.Join(p, "/")
	fh, err := h.handleOf(name)
	if err != nil {
		return nil
	}
	h.remember(fh, p)
	return fh
}

// handleOf makes the handle of p inside the root.
func (h *handler) handleOf(p string) ([]byte, error) {
	dir, name, err := h.fs.parent(p)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	fd := dir
	if name != "" {
		if fd, err = unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
			return nil, err
		}
		defer unix.Close(fd)
	}
	kh, _, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(kh.Type()))
	return append(out, kh.Bytes()...), nil
}

func (h *handler) remember(fh []byte, p []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.paths) >= maxCached {
		clear(h.paths)
	}
	h.paths[string(fh)] = append([]string(nil), p...)
}

var errStale = errors.New("stale file handle")

// FromHandle returns the path a handle names now: the cached one if it
// still names that inode, else the kernel's path of the inode (for a
// directory always known; for a file while the host caches its name).
// Either is checked by making its handle again.
func (h *handler) FromHandle(fh []byte) (billy.Filesystem, []string, error) {
	if len(fh) < 5 || len(fh) > 64 {
		return nil, nil, errStale
	}
	h.mu.Lock()
	p, ok := h.paths[string(fh)]
	h.mu.Unlock()
	if ok && h.same(fh, p) {
		return h.fs, p, nil
	}
	p, err := h.kernelPath(fh)
	if err != nil || !h.same(fh, p) {
		return nil, nil, errStale
	}
	h.remember(fh, p)
	return h.fs, p, nil
}

func (h *handler) same(fh []byte, p []string) bool {
	now, err := h.handleOf(strings.Join(p, "/"))
	return err == nil && bytes.Equal(now, fh)
}

// kernelPath opens the handle's inode on this volume and reads its path
// below the root.
func (h *handler) kernelPath(fh []byte) ([]string, error) {
	kh := unix.NewFileHandle(int32(binary.BigEndian.Uint32(fh)), fh[4:])
	fd, err := unix.OpenByHandleAt(h.fs.rootFD, kh, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return nil, err
	}
	root := h.fs.rootPath
	switch {
	case target == root:
		return []string{}, nil
	case strings.HasPrefix(target, root+"/"):
		return strings.Split(target[len(root)+1:], "/"), nil
	}
	return nil, syscall.ESTALE
}

// InvalidateHandle has nothing to drop: handles are the kernel's.
func (h *handler) InvalidateHandle(billy.Filesystem, []byte) error { return nil }

// HandleLimit bounds a directory listing's reply (the server lists at
// most half of it per call).
func (h *handler) HandleLimit() int { return 1 << 20 }
