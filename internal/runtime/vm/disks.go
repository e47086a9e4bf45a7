package vm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"corral/internal/vminit"
)

// mkfsTimeout bounds making one disk image.
const mkfsTimeout = 10 * time.Minute

// roDisk returns a read-only ext4 image of dir, cached under cacheDir by
// name and building it when missing. Concurrent callers for one name are
// serialised by lock.
func (r *Runtime) roDisk(ctx context.Context, dir, name string) (string, error) {
	out := filepath.Join(r.cfg.StateDir, "disks", name+".ext4")
	unlock := r.lockKey(out)
	defer unlock()
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	size, inodes, err := treeSize(dir)
	if err != nil {
		return "", fmt.Errorf("sizing %s: %w", dir, err)
	}
	// Room for metadata, directories and rounding; no journal, no
	// reserved blocks: the image is never written.
	sizeMB := size/(1<<20)*115/100 + 64
	// The source directory, for PruneCaches, before the image appears.
	if err := os.WriteFile(strings.TrimSuffix(out, ".ext4")+".src", []byte(dir), 0o600); err != nil {
		return "", err
	}
	start := time.Now()
	err = writeAtomicPath(out, func(tmp string) error {
		return mkfs(ctx, tmp, sizeMB, dir, "-O", "^has_journal", "-N", strconv.FormatInt(inodes*12/10+4096, 10))
	})
	if err != nil {
		return "", fmt.Errorf("making the disk image of %s: %w", dir, err)
	}
	r.log.Info("disk image built", "op", "disk", "src", dir, "image", out, "mb", sizeMB, "took", time.Since(start).Round(time.Millisecond))
	return out, nil
}

// rootDiskName names the cached image of a root filesystem directory: its
// path and identity (an image's mount is content-addressed by path; the
// base directory is replaced, with a new inode, when deps.sh rebuilds it).
func rootDiskName(dir string) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("stat %s: no inode", dir)
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\n%d\n%d\n%d", dir, st.Dev, st.Ino, fi.ModTime().UnixNano())))
	return "root-" + hex.EncodeToString(h[:])[:32], nil
}

// scratchDisk makes the sandbox's writable disk: sizeMB of sparse ext4
// holding config.json and the overlay's empty upper and work directories.
func scratchDisk(ctx context.Context, dir string, sizeMB int64, cfg vminit.Config) (string, error) {
	seed := filepath.Join(dir, "scratch-seed")
	defer os.RemoveAll(seed)
	for _, d := range []string{filepath.Dir(vminit.ConfigPath), vminit.UpperDir, vminit.WorkDir} {
		if err := os.MkdirAll(filepath.Join(seed, d), 0o755); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(seed, vminit.ConfigPath), b, 0o600); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "scratch.ext4")
	if err := mkfs(ctx, out, sizeMB, seed, "-E", "lazy_itable_init=1,lazy_journal_init=1"); err != nil {
		return "", fmt.Errorf("making the scratch disk: %w", err)
	}
	return out, nil
}

// mkfs makes an ext4 file system of sizeMB in the (new, sparse) file path,
// populated from dir.
func mkfs(ctx context.Context, path string, sizeMB int64, dir string, extra ...string) error {
	ctx, cancel := context.WithTimeout(ctx, mkfsTimeout)
	defer cancel()
	args := append([]string{"-q", "-F", "-t", "ext4", "-m", "0", "-d", dir}, extra...)
	args = append(args, path, strconv.FormatInt(sizeMB, 10)+"M")
	out, err := exec.CommandContext(ctx, "mkfs.ext4", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4 %s: %v: %s", path, err, lastLine(out))
	}
	return nil
}

// treeSize sums the space files under dir need (4 KiB blocks) and counts
// its entries, without following symlinks or leaving its file system.
func treeSize(dir string) (bytes, entries int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		entries++
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			bytes += (fi.Size() + 4095) &^ 4095
		} else {
			bytes += 4096
		}
		return nil
	})
	return bytes, entries, err
}

// writeAtomicPath lets make write a temporary file beside path, then
// renames it into place.
func writeAtomicPath(path string, make func(tmp string) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".tmp-%s-%d", filepath.Base(path), time.Now().UnixNano()))
	defer os.Remove(tmp)
	if err := make(tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// PruneCaches removes the cached root disk images whose source directory
// is gone or was replaced (a pruned image, a rebuilt base), and initramfs
// files of other agent binaries. A running guest keeps its open files, so
// nothing in use breaks. It returns the bytes freed.
func (r *Runtime) PruneCaches() (int64, error) {
	dir := filepath.Join(r.cfg.StateDir, "disks")
	current, err := r.initramfs()
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var freed int64
	for _, e := range ents {
		name := e.Name()
		var stale bool
		switch {
		case strings.HasPrefix(name, "root-") && strings.HasSuffix(name, ".ext4"):
			unlock := r.lockKey(filepath.Join(dir, name))
			stale = r.staleRootDisk(filepath.Join(dir, name))
			unlock()
		case strings.HasPrefix(name, "initramfs-"):
			stale = filepath.Join(dir, name) != current
		}
		if !stale {
			continue
		}
		if fi, err := e.Info(); err == nil {
			freed += fi.Size()
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return freed, err
		}
		_ = os.Remove(filepath.Join(dir, strings.TrimSuffix(name, ".ext4")+".src"))
	}
	if freed > 0 {
		r.log.Info("pruned vm disk caches", "op", "prune", "bytes", freed)
	}
	return freed, nil
}

// staleRootDisk reports a root disk image whose recorded source no longer
// has the identity the image was named after.
func (r *Runtime) staleRootDisk(path string) bool {
	src, err := os.ReadFile(strings.TrimSuffix(path, ".ext4") + ".src")
	if err != nil {
		return true
	}
	name, err := rootDiskName(string(src))
	return err != nil || name+".ext4" != filepath.Base(path)
}
