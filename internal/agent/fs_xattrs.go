package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// xattrWrite applies a write's extended attributes (agentapi.XattrSet,
// since XattrsSince) to the file being written, through its open
// descriptor, and keeps what it read back for the answer.
type xattrWrite struct {
	set         *agentapi.XattrSet
	got         map[string]string
	unsupported bool
}

// apply replaces f's attributes under the set's prefix with its values:
// those not named are removed, the named ones set, and the result read
// back. A filesystem without extended attributes (ENOTSUP) is no error:
// the body stays written and the answer says the attributes were not kept.
func (x *xattrWrite) apply(f *os.File) error {
	if x == nil || x.set == nil {
		return nil
	}
	fd := int(f.Fd())
	names, err := listXattrs(fd)
	if err == nil {
		err = x.replace(fd, names)
	}
	if err == nil {
		x.got, err = readXattrs(fd, x.set.Prefix)
	}
	if errors.Is(err, unix.ENOTSUP) {
		x.got, x.unsupported = nil, true
		return nil
	}
	if errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ERANGE) {
		return fmt.Errorf("%w: setting extended attributes: %v", errdefs.ErrResourceExhausted, err)
	}
	if err != nil {
		return fmt.Errorf("setting extended attributes: %w", err)
	}
	return nil
}

// replace removes the attributes under the prefix the set does not name,
// then sets the set's values.
func (x *xattrWrite) replace(fd int, names []string) error {
	for _, n := range names {
		k, ok := strings.CutPrefix(n, x.set.Prefix)
		if !ok {
			continue
		}
		if _, keep := x.set.Values[k]; keep {
			continue
		}
		if err := unix.Fremovexattr(fd, n); err != nil && !errors.Is(err, unix.ENODATA) {
			return err
		}
	}
	for k, v := range x.set.Values {
		if err := unix.Fsetxattr(fd, x.set.Prefix+k, []byte(v), 0); err != nil {
			return err
		}
	}
	return nil
}

// listXattrs lists the attribute names of an open file.
func listXattrs(fd int) ([]string, error) {
	return listXattrsWith(func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) })
}

// listXattrsWith lists attribute names with a listxattr call.
func listXattrsWith(list func([]byte) (int, error)) ([]string, error) {
	for range 3 {
		size, err := list(nil)
		if err != nil || size == 0 {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := list(buf)
		if errors.Is(err, unix.ERANGE) {
			continue // grew between the two calls
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, b := range bytes.Split(buf[:n], []byte{0}) {
			if len(b) > 0 {
				names = append(names, string(b))
			}
		}
		return names, nil
	}
	return nil, unix.ERANGE
}

// readXattrs reads the attributes of an open file under prefix, names
// without it.
func readXattrs(fd int, prefix string) (map[string]string, error) {
	return readXattrsWith(prefix,
		func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) },
		func(name string, buf []byte) (int, error) { return unix.Fgetxattr(fd, name, buf) })
}

// readXattrsWith reads the attributes under prefix with a listxattr and a
// getxattr call.
func readXattrsWith(prefix string, list func([]byte) (int, error), get func(string, []byte) (int, error)) (map[string]string, error) {
	names, err := listXattrsWith(list)
	if err != nil {
		return nil, err
	}
	var out map[string]string
	for _, n := range names {
		k, ok := strings.CutPrefix(n, prefix)
		if !ok {
			continue
		}
		buf := make([]byte, agentapi.MaxXattrTotal)
		m, err := get(n, buf)
		if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ERANGE) {
			continue // removed meanwhile, or larger than any write sets
		}
		if err != nil {
			return nil, err
		}
		if !utf8.ValidString(k) || !utf8.Valid(buf[:m]) {
			continue // set inside the sandbox; JSON would mangle it
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = string(buf[:m])
	}
	return out, nil
}

// xattrPrefix reads the xattrs query of a stat or a listing (since
// XattrsSince): the attribute prefix whose attributes each entry carries;
// "" for none.
func xattrPrefix(q string) (string, error) {
	if q == "" {
		return "", nil
	}
	if err := (&agentapi.XattrSet{Prefix: q}).Validate(); err != nil {
		return "", err
	}
	return q, nil
}

// withXattrs adds to e the attributes of host (a regular file or a
// directory; symlinks have no user attributes) under prefix, by path
// without following a final symlink (lgetxattr: the path was resolved
// inside the root, and nothing is written). A filesystem without them
// marks the entry; attributes that cannot be read leave the entry without
// them rather than failing a stat or a listing.
func withXattrs(e agentapi.EntryInfo, host, prefix string) agentapi.EntryInfo {
	if prefix == "" || (e.Type != agentapi.EntryFile && e.Type != agentapi.EntryDir) {
		return e
	}
	got, err := readXattrsWith(prefix,
		func(buf []byte) (int, error) { return unix.Llistxattr(host, buf) },
		func(name string, buf []byte) (int, error) { return unix.Lgetxattr(host, name, buf) })
	switch {
	case errors.Is(err, unix.ENOTSUP):
		e.XattrsUnsupported = true
	case err == nil:
		e.Xattrs = got
	}
	return e
}
