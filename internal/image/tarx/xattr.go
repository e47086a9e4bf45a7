package tarx

import (
	"archive/tar"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Bounds the kernel puts on an extended attribute (XATTR_NAME_MAX,
// XATTR_SIZE_MAX), checked first so that a layer's attribute is refused by
// name rather than failing in fsetxattr.
const (
	maxXattrName  = 255
	maxXattrValue = 64 << 10
)

// The forms of security.capability the kernel takes (vfs_cap_data revision
// 2, and revision 3 with a root uid); revision 1 is refused by every
// current kernel.
const (
	capRevisionMask = 0xFF000000
	capRevision2    = 0x02000000
	capRevision3    = 0x03000000
	capSize2        = 20
	capSize3        = 24
)

// xattrs applies the PAX xattr records of the namespaces a layer may carry.
// A record the kernel would refuse is the layer's fault: invalid, naming
// the entry and the attribute.
func (x *extractor) xattrs(fd int, hdr *tar.Header) error {
	for k, v := range hdr.PAXRecords {
		attr, ok := strings.CutPrefix(k, paxXattr)
		if !ok {
			continue
		}
		allowed := strings.HasPrefix(attr, "user.") || (attr == "security.capability" && x.isRoot)
		if !allowed {
			continue
		}
		if err := checkXattr(attr, v); err != nil {
			return refuse(hdr.Name, "xattr %q: %v", truncateName(attr), err)
		}
		if err := unix.Fsetxattr(fd, attr, []byte(v), 0); err != nil {
			if layerErrno(err) {
				return refuse(hdr.Name, "xattr %q: %v", truncateName(attr), err)
			}
			return fmt.Errorf("setting xattr %s: %w", truncateName(attr), err)
		}
	}
	return nil
}

// checkXattr checks what the kernel checks of an attribute a layer sets.
func checkXattr(name, value string) error {
	switch {
	case len(name) > maxXattrName:
		return fmt.Errorf("name longer than %d bytes", maxXattrName)
	case name == "user.":
		return errors.New("empty name")
	case len(value) > maxXattrValue:
		return fmt.Errorf("value larger than %d bytes", maxXattrValue)
	case name == "security.capability":
		return checkCapability([]byte(value))
	}
	return nil
}

// checkCapability checks a security.capability value: vfs_cap_data of
// revision 2 (20 bytes) or 3 (24 bytes).
func checkCapability(v []byte) error {
	if len(v) >= 4 {
		rev := binary.LittleEndian.Uint32(v) & capRevisionMask
		if (rev == capRevision2 && len(v) == capSize2) || (rev == capRevision3 && len(v) == capSize3) {
			return nil
		}
	}
	return fmt.Errorf("not a file capability set (%d bytes; want %d bytes of revision 2 or %d of revision 3)", len(v), capSize2, capSize3)
}

// layerErrno reports whether a failed system call failed because of what
// the layer asked for (a name component longer than the filesystem takes,
// an attribute or time it refuses, too many links to one file) rather than
// because of the host.
func layerErrno(err error) bool {
	for _, e := range []unix.Errno{unix.ENAMETOOLONG, unix.EINVAL, unix.E2BIG, unix.ERANGE, unix.EMLINK, unix.EOVERFLOW} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func truncateName(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
