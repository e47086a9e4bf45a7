// Package overlaytar turns a tar of an overlayfs upper directory into an OCI
// layer tar with the same changes.
//
// A runtime records a sandbox's filesystem changes as an overlayfs upper
// layer: gVisor's `runsc tar rootfs-upper` serialises its in-sandbox
// overlay that way, and a VM's guest overlayfs writes the same format to
// its scratch disk. In that format a deleted path is a 0/0 character
// device (possibly several names hard-linked to one such device), and a
// directory that hides everything below it carries the xattr
// trusted.overlay.opaque=y. An OCI layer says the same with ".wh.<name>"
// and ".wh..wh..opq" marker files, which is what the image store and every
// other OCI tool read.
//
// The input comes from inside a sandbox and is treated as hostile: names are
// cleaned, "trusted." xattrs never pass through, names that already look
// like whiteout markers and sparse files are refused, and device nodes
// other than whiteouts, FIFOs and sockets are left out (and counted). The
// output still goes through the store's safe extractor.
//
// This package imports only the standard library and errdefs.
package overlaytar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"corral/internal/errdefs"
)

const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
	paxXattr       = "SCHILY.xattr."
	opaqueXattr    = paxXattr + "trusted.overlay.opaque"
	gnuSparse      = "GNU.sparse."
	maxSkipped     = 20
)

// Options tune a conversion.
type Options struct {
	// Exclude lists absolute paths left out of the layer, and deletions of
	// them too: files the runtime itself writes into every sandbox.
	Exclude []string
	// MaxBytes, when positive, bounds the data of the layer's regular
	// files: an upper layer that holds more is refused
	// (errdefs.ErrResourceExhausted) at the header of the file that
	// passes it, before its data is read. A runtime passes the sandbox's
	// disk size: its writable layer cannot hold more, but a file it holds
	// sparsely (a hole of any size costs nothing inside) would be
	// exported as that many zeros.
	MaxBytes int64
}

// Stats describes a conversion.
type Stats struct {
	Entries   int // entries written, markers included
	Whiteouts int // deletions
	Opaque    int // opaque directories
	// Skipped names entries left out because a layer cannot hold them
	// (devices, FIFOs, sockets); at most 20 are kept, SkippedCount counts
	// them all.
	Skipped      []string
	SkippedCount int
}

// Convert reads an overlayfs upper tar from r and writes the OCI layer tar
// to w.
func Convert(r io.Reader, w io.Writer, opts Options) (Stats, error) {
	c := converter{
		maxBytes:  opts.MaxBytes,
		tr:        tar.NewReader(r),
		tw:        tar.NewWriter(w),
		exclude:   map[string]bool{},
		whiteouts: map[string]bool{},
	}
	for _, p := range opts.Exclude {
		c.exclude[cleanName(p)] = true
	}
	for {
		hdr, err := c.tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return c.st, fmt.Errorf("reading upper layer tar: %w", err)
		}
		if err := c.entry(hdr); err != nil {
			return c.st, err
		}
	}
	if err := c.tw.Close(); err != nil {
		return c.st, fmt.Errorf("writing layer tar: %w", err)
	}
	return c.st, nil
}

type converter struct {
	tr        *tar.Reader
	tw        *tar.Writer
	exclude   map[string]bool
	whiteouts map[string]bool // names already turned into whiteouts
	st        Stats
	maxBytes  int64 // Options.MaxBytes
	bytes     int64 // regular files' data so far
}

func (c *converter) entry(hdr *tar.Header) error {
	name := cleanName(hdr.Name)
	if name == "" || hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // the layer root, or archive-wide defaults
	}
	if strings.HasPrefix(path.Base(name), whiteoutPrefix) {
		return fmt.Errorf("%w: upper layer entry %q: a name beginning with %q cannot be stored in a layer", errdefs.ErrInvalidArgument, name, whiteoutPrefix)
	}
	isWhiteout := hdr.Typeflag == tar.TypeChar && hdr.Devmajor == 0 && hdr.Devminor == 0
	if c.exclude[name] {
		if isWhiteout {
			// Still a whiteout for the hard links to it that follow
			// (runsc links every whiteout to the first one).
			c.whiteouts[name] = true
		}
		return nil
	}
	switch hdr.Typeflag {
	case tar.TypeChar:
		if isWhiteout {
			return c.whiteout(name)
		}
		c.skip(name)
		return nil
	case tar.TypeBlock, tar.TypeFifo:
		c.skip(name)
		return nil
	case tar.TypeLink:
		target := cleanName(hdr.Linkname)
		if c.whiteouts[target] {
			return c.whiteout(name)
		}
		if c.exclude[target] {
			return fmt.Errorf("%w: upper layer entry %q: a hard link to %q, which is not part of a layer", errdefs.ErrInvalidArgument, name, target)
		}
		hdr.Linkname = target
	case tar.TypeReg:
		if isSparse(hdr) {
			return fmt.Errorf("%w: upper layer entry %q: a sparse file, which neither runtime writes (its holes would be copied out as zeros)", errdefs.ErrInvalidArgument, name)
		}
		if c.maxBytes > 0 && (hdr.Size < 0 || hdr.Size > c.maxBytes-c.bytes) {
			return fmt.Errorf("%w: upper layer entry %q: the layer's files hold more than the sandbox's disk of %d MiB (a sparse file?)", errdefs.ErrResourceExhausted, name, c.maxBytes>>20)
		}
		c.bytes += hdr.Size
	case tar.TypeDir, tar.TypeSymlink:
	default:
		c.skip(name)
		return nil
	}
	return c.copy(hdr, name)
}

// copy writes hdr (under its cleaned name) and its data, without trusted.
// xattrs; an opaque directory is followed by its marker.
func (c *converter) copy(hdr *tar.Header, name string) error {
	opaque := hdr.Typeflag == tar.TypeDir && hdr.PAXRecords[opaqueXattr] == "y"
	// Every field but the xattrs: PAXRecords gets those kept below, and the
	// deprecated Xattrs (which tar.Reader fills with the same records, and
	// tar.Writer would write back) stays empty. Format is the writer's
	// choice.
	out := tar.Header{
		Typeflag: hdr.Typeflag, Name: name, Linkname: hdr.Linkname, Size: hdr.Size, Mode: hdr.Mode,
		Uid: hdr.Uid, Gid: hdr.Gid, Uname: hdr.Uname, Gname: hdr.Gname,
		ModTime: hdr.ModTime, AccessTime: hdr.AccessTime, ChangeTime: hdr.ChangeTime,
		Devmajor: hdr.Devmajor, Devminor: hdr.Devminor,
	}
	if hdr.Typeflag == tar.TypeDir {
		out.Name += "/"
	}
	for k, v := range hdr.PAXRecords {
		if strings.HasPrefix(k, paxXattr) && !strings.HasPrefix(k, paxXattr+"trusted.") {
			if out.PAXRecords == nil {
				out.PAXRecords = map[string]string{}
			}
			out.PAXRecords[k] = v
		}
	}
	if err := c.tw.WriteHeader(&out); err != nil {
		return fmt.Errorf("writing layer entry %q: %w", name, err)
	}
	if hdr.Typeflag == tar.TypeReg {
		if _, err := io.Copy(c.tw, c.tr); err != nil {
			return fmt.Errorf("copying layer entry %q: %w", name, err)
		}
	}
	c.st.Entries++
	if !opaque {
		return nil
	}
	c.st.Opaque++
	return c.marker(path.Join(name, opaqueMarker), hdr)
}

func (c *converter) whiteout(name string) error {
	c.whiteouts[name] = true
	c.st.Whiteouts++
	dir, base := path.Split(name)
	return c.marker(dir+whiteoutPrefix+base, nil)
}

// marker writes an empty marker file (owned by root, mode 0, with from's
// times when given).
func (c *converter) marker(name string, from *tar.Header) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0}
	if from != nil {
		hdr.ModTime = from.ModTime
	}
	if err := c.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing layer entry %q: %w", name, err)
	}
	c.st.Entries++
	return nil
}

func (c *converter) skip(name string) {
	c.st.SkippedCount++
	if len(c.st.Skipped) < maxSkipped {
		c.st.Skipped = append(c.st.Skipped, name)
	}
}

// isSparse reports whether hdr is a GNU sparse file in one of the PAX
// forms, which archive/tar reads as a regular file of its full size with
// zeros in the holes: a few input bytes could then stand for terabytes of
// output. (The old GNU form has a type of its own and is skipped.)
func isSparse(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, gnuSparse) {
			return true
		}
	}
	return false
}

// cleanName returns name relative to the layer root, cleaned, without a
// leading "./" or "/"; "" for the root itself. ".." cannot climb above the
// root (path.Clean of an absolute path stops there).
func cleanName(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}
