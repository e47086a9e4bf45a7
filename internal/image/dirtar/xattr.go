package dirtar

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// keepXattr says whether an extended attribute goes into the layer: only
// those the layer extractor applies.
func keepXattr(name string, overlay bool) bool {
	return name == "security.capability" || strings.HasPrefix(name, "user.") ||
		overlay && name == "trusted.overlay.opaque"
}

// xattrRecords returns the kept extended attributes of p (not followed if
// a symlink) as PAX records; nil when there are none or the file system
// has none.
func xattrRecords(p string, overlay bool) (map[string]string, error) {
	names, err := listXattrs(p)
	if err != nil {
		return nil, err
	}
	var recs map[string]string
	for _, name := range names {
		if !keepXattr(name, overlay) {
			continue
		}
		val, ok, err := getXattr(p, name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if recs == nil {
			recs = map[string]string{}
		}
		recs["SCHILY.xattr."+name] = string(val)
	}
	return recs, nil
}

// listXattrs lists the extended attribute names of p.
func listXattrs(p string) ([]string, error) {
	for {
		n, err := unix.Llistxattr(p, nil)
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing extended attributes of %s: %w", p, err)
		}
		if n == 0 {
			return nil, nil
		}
		buf := make([]byte, n)
		n, err = unix.Llistxattr(p, buf)
		if errors.Is(err, unix.ERANGE) {
			continue // the list grew since it was measured
		}
		if err != nil {
			return nil, fmt.Errorf("listing extended attributes of %s: %w", p, err)
		}
		return splitNames(buf[:n]), nil
	}
}

// splitNames splits a NUL-terminated list of names.
func splitNames(buf []byte) []string {
	var names []string
	for _, s := range strings.Split(string(buf), "\x00") {
		if s != "" {
			names = append(names, s)
		}
	}
	return names
}

// getXattr reads one extended attribute of p; ok is false when it has gone
// since it was listed.
func getXattr(p, name string) (val []byte, ok bool, err error) {
	for {
		n, err := unix.Lgetxattr(p, name, nil)
		if errors.Is(err, unix.ENODATA) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("reading extended attribute %s of %s: %w", name, p, err)
		}
		buf := make([]byte, n)
		n, err = unix.Lgetxattr(p, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue // the value grew since it was measured
		}
		if errors.Is(err, unix.ENODATA) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("reading extended attribute %s of %s: %w", name, p, err)
		}
		return buf[:n], true, nil
	}
}
