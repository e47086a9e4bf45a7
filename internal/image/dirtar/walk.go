package dirtar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// fileID names an inode, to find the other names of a hard-linked file.
type fileID struct {
	dev, ino uint64
}

// writer is the state of one Write.
type writer struct {
	tw    *tar.Writer
	opts  Options
	links map[fileID]string // first entry name of each multiply-linked file
	stats Stats
}

// tree writes the parents of name, name itself (unless it is the root)
// with the metadata of the directory src, and everything under src.
func (wr *writer) tree(src, name string, fi fs.FileInfo) error {
	if name != "" {
		if err := wr.parents(name); err != nil {
			return err
		}
		if err := wr.entry(src, name, fi); err != nil {
			return err
		}
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == src {
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return wr.entry(p, path.Join(name, filepath.ToSlash(rel)), info)
	})
}

// file writes the parents of name and the regular file src at name.
func (wr *writer) file(src, name string, fi fs.FileInfo) error {
	if err := wr.parents(name); err != nil {
		return err
	}
	return wr.entry(src, name, fi)
}

// parents writes a directory entry (0755, 0:0, NormalTime) for each parent
// of name, outermost first.
func (wr *writer) parents(name string) error {
	dirs := strings.Split(name, "/")
	for i := 1; i < len(dirs); i++ {
		hdr := &tar.Header{
			Typeflag: tar.TypeDir,
			Name:     strings.Join(dirs[:i], "/") + "/",
			Mode:     0o755,
			ModTime:  NormalTime,
			Format:   tar.FormatPAX,
		}
		if err := wr.write(hdr); err != nil {
			return err
		}
	}
	return nil
}

// entry writes the file p, described by its lstat fi, as the entry name.
func (wr *writer) entry(p, name string, fi fs.FileInfo) error {
	hdr, err := wr.header(p, name, fi)
	if err != nil || hdr == nil {
		return err
	}
	if err := wr.write(hdr); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil
	}
	return wr.contents(p, fi, hdr.Size)
}

// header builds the header of one entry; nil for a file that is skipped.
func (wr *writer) header(p, name string, fi fs.FileInfo) (*tar.Header, error) {
	hdr := &tar.Header{Name: name, Mode: tarMode(fi.Mode()), Format: tar.FormatPAX}
	wr.setOwnerAndTime(hdr, fi)
	switch m := fi.Mode(); {
	case m.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
	case m.IsRegular():
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		if first, ok := wr.firstName(name, fi); ok {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
		}
	case m&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return nil, err
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	case wr.opts.Overlay && fi.Mode()&fs.ModeNamedPipe != 0:
		hdr.Typeflag = tar.TypeFifo
	case wr.opts.Overlay && fi.Mode()&fs.ModeDevice != 0:
		hdr.Typeflag = tar.TypeBlock
		if fi.Mode()&fs.ModeCharDevice != 0 {
			hdr.Typeflag = tar.TypeChar
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			hdr.Devmajor, hdr.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		}
	default:
		wr.skip(name)
		return nil, nil
	}
	if !wr.opts.Normalize && (hdr.Typeflag == tar.TypeDir || hdr.Typeflag == tar.TypeReg) {
		recs, err := xattrRecords(p, wr.opts.Overlay)
		if err != nil {
			return nil, err
		}
		hdr.PAXRecords = recs
	}
	return hdr, nil
}

// setOwnerAndTime fills in the owner and time: fixed ones when normalizing,
// the file's own (time truncated to seconds) otherwise.
func (wr *writer) setOwnerAndTime(hdr *tar.Header, fi fs.FileInfo) {
	if wr.opts.Normalize {
		hdr.ModTime = NormalTime
		return
	}
	hdr.ModTime = fi.ModTime().Truncate(1e9).UTC()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
	}
}

// firstName returns the name under which a multiply-linked regular file was
// already written, or records name as its first.
func (wr *writer) firstName(name string, fi fs.FileInfo) (string, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return "", false
	}
	id := fileID{dev: uint64(st.Dev), ino: st.Ino}
	if first, ok := wr.links[id]; ok {
		return first, true
	}
	wr.links[id] = name
	return "", false
}

// skip records a device node, socket or FIFO left out.
func (wr *writer) skip(name string) {
	wr.stats.SkippedCount++
	if len(wr.stats.Skipped) < MaxSkippedNames {
		wr.stats.Skipped = append(wr.stats.Skipped, name)
	}
}

func (wr *writer) write(hdr *tar.Header) error {
	if err := wr.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing entry %q: %w", hdr.Name, err)
	}
	wr.stats.Entries++
	return nil
}

// contents copies the regular file p, which must still be the file that
// was walked and still be size bytes long.
func (wr *writer) contents(p string, fi fs.FileInfo, size int64) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	now, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(fi, now) || now.Size() != size {
		return fmt.Errorf("%s changed while being read", p)
	}
	n, err := io.CopyN(wr.tw, f, size)
	wr.stats.Bytes += n
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s shrank while being read", p)
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", p, err)
	}
	return nil
}

// tarMode keeps the permission bits and setuid, setgid and sticky.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}
