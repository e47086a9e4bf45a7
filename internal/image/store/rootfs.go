package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
	"corral/internal/mountinfo"
)

// The mount points the gVisor runtime binds onto; they must exist in a root
// filesystem before it is shared (runsc would otherwise create them in it).
const (
	mpDir   = ".corral"
	mpAgent = ".corral/corral" // an empty regular file
	mpChan  = ".corral/run"    // a directory
)

const opaqueXattr = "trusted.overlay.opaque"

// ensureMountpoints makes <root>/mountpoints, the store's own top layer
// holding the runtime's mount points, if it is not there yet.
func (s *Store) ensureMountpoints() error {
	dir := s.path("mountpoints")
	if _, err := os.Lstat(dir); err == nil {
		if !providesMountpoints([]string{dir}) {
			return fmt.Errorf("corrupt layer %s: lacks %s or %s", dir, mpAgent, mpChan)
		}
		return nil
	}
	tmp, err := os.MkdirTemp(s.path("tmp"), "mountpoints-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(tmp, mpChan), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, mpAgent), nil, 0o755); err != nil {
		return err
	}
	if err := syncTree(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return syncDir(s.root)
}

// providesMountpoints reports whether the stack of layer directories (top
// first) shows /.corral/corral as a regular file and /.corral/run as a
// directory.
func providesMountpoints(top []string) bool {
	agent, ok1 := lookupStacked(top, mpAgent)
	ch, ok2 := lookupStacked(top, mpChan)
	return ok1 && ok2 && agent.Mode().IsRegular() && ch.IsDir()
}

// lookupStacked finds rel (a clean relative path) in the overlay of the
// layer directories top (top first), following overlayfs rules: a whiteout
// or a non-directory hides what lies below, an opaque directory hides the
// lower layers' contents.
func lookupStacked(top []string, rel string) (os.FileInfo, bool) {
	parts := strings.Split(rel, "/")
	for _, layer := range top {
		p := layer
		opaque := false
		for i, part := range parts {
			p = filepath.Join(p, part)
			fi, err := os.Lstat(p)
			if err != nil {
				break // not in this layer; look lower unless an opaque dir stops us
			}
			if isWhiteout(fi) {
				return nil, false
			}
			if i == len(parts)-1 {
				return fi, true
			}
			if !fi.IsDir() {
				return nil, false
			}
			if v, err := getxattr(p, opaqueXattr); err == nil && v == "y" {
				opaque = true
			}
		}
		if opaque {
			return nil, false
		}
	}
	return nil, false
}

func isWhiteout(fi os.FileInfo) bool {
	if fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

func getxattr(path, attr string) (string, error) {
	buf := make([]byte, 16)
	n, err := unix.Lgetxattr(path, attr, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// RootFS returns the directory to give runsc as the root of a sandbox of
// image d: the image's layers stacked. For a single layer that already
// carries the runtime's mount points it is the layer's own directory;
// otherwise it is a read-only overlayfs at <root>/mounts/<hex>, mounted on
// the first call and shared by every sandbox of the image afterwards. The
// store adds its own top layer with the mount points when the image lacks
// them, so nothing is ever written into a shared layer.
//
// Take the sandbox's Lease before calling RootFS: Prune unmounts the mounts
// of images no lease holds. The directory is read-only; runsc gives each
// sandbox its private writable layer (--overlay2).
func (s *Store) RootFS(d Digest) (string, error) {
	if _, err := ParseDigest(string(d)); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	img, err := s.readImage(d)
	if err != nil {
		return "", fmt.Errorf("rootfs of %s: %w", d, err)
	}
	var dirs []string // top first
	for i := len(img.Layers) - 1; i >= 0; i-- {
		if _, err := s.readLayer(img.Layers[i]); err != nil {
			return "", fmt.Errorf("rootfs of %s: %w", d, err)
		}
		dirs = append(dirs, filepath.Join(s.layerDir(img.Layers[i]), "fs"))
	}
	if !providesMountpoints(dirs) {
		dirs = append([]string{s.path("mountpoints")}, dirs...)
	}
	if len(dirs) == 1 {
		return dirs[0], nil
	}
	target := s.path("mounts", d.Hex())
	mounted, err := isMountpoint(target)
	if err != nil {
		return "", fmt.Errorf("rootfs of %s: %w", d, err)
	}
	if mounted {
		return target, nil
	}
	if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("rootfs of %s: %w", d, err)
	}
	if err := mountOverlay(target, dirs); err != nil {
		return "", fmt.Errorf("rootfs of %s: %w", d, err)
	}
	s.log.Info("image mounted", "op", "rootfs", "image", d, "layers", len(dirs), "dir", target)
	return target, nil
}

// mountOverlay mounts a read-only overlay of dirs (top first) at target.
// Each lower directory is named by a /proc/self/fd path, so the option
// stays short (about 17 bytes a layer) whatever the store's root, and
// needs no escaping of ':' or ','.
func mountOverlay(target string, dirs []string) error {
	var opt strings.Builder
	opt.WriteString("lowerdir=")
	fds := make([]int, 0, len(dirs))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for i, dir := range dirs {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("opening layer %s: %w", dir, err)
		}
		fds = append(fds, fd)
		if i > 0 {
			opt.WriteByte(':')
		}
		opt.WriteString("/proc/self/fd/" + strconv.Itoa(fd))
	}
	// The kernel copies mount data into one page.
	if limit := os.Getpagesize() - 1; opt.Len() > limit {
		return fmt.Errorf("%w: overlay of %d layers needs a %d-byte lowerdir option, over the kernel's %d",
			errdefs.ErrResourceExhausted, len(dirs), opt.Len(), limit)
	}
	if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY, opt.String()); err != nil {
		return fmt.Errorf("mounting overlay at %s: %w", target, err)
	}
	return nil
}

// isMountpoint reports whether path is a mount point, from
// /proc/self/mountinfo.
func isMountpoint(path string) (bool, error) {
	mps, err := mountpoints()
	if err != nil {
		return false, err
	}
	return mps[path], nil
}

func mountpoints() (map[string]bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out[mountinfo.Unescape(fields[4])] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return out, nil
}
