// Package hostpath keeps the host's own paths (the daemon's state
// directory, the base root filesystem) out of the messages the daemon
// sends to API callers: an error from deep in the daemon may name the file
// it failed on, and a caller has no business learning the host's layout.
// The API replaces them once, on the way out, as it translates errors;
// the daemon's log keeps the full message.
//
// This package imports only the standard library.
package hostpath

import (
	"path/filepath"
	"sort"
	"strings"
)

// Placeholder stands for a host path in a redacted message.
const Placeholder = "<host path>"

// Redactor replaces host paths in messages.
type Redactor struct {
	roots []string // clean, absolute, longest first
}

// NewRedactor returns a Redactor of every path at or below roots. Empty,
// relative and root ("/") entries are ignored: a caller's own paths (in a
// sandbox) must survive.
func NewRedactor(roots ...string) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, p := range roots {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		if p == "/" || seen[p] {
			continue
		}
		seen[p] = true
		r.roots = append(r.roots, p)
	}
	sort.Slice(r.roots, func(i, j int) bool { return len(r.roots[i]) > len(r.roots[j]) })
	return r
}

// String returns msg with every path at or below one of the roots, up to
// the end of the path (a space, a quote, a colon, a comma or a closing
// bracket), replaced by Placeholder. A nil Redactor returns msg.
func (r *Redactor) String(msg string) string {
	if r == nil {
		return msg
	}
	for _, root := range r.roots {
		msg = redact(msg, root)
	}
	return msg
}

func redact(msg, root string) string {
	var b strings.Builder
	for {
		i := indexPath(msg, root)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		end := i + len(root)
		for end < len(msg) && !isEnd(msg[end]) {
			end++
		}
		b.WriteString(msg[:i])
		b.WriteString(Placeholder)
		msg = msg[end:]
	}
}

// indexPath finds root in msg where it is a whole path or a path's start:
// not preceded by a path character, and followed by the end, "/" or the end
// of a path.
func indexPath(msg, root string) int {
	for off := 0; ; {
		i := strings.Index(msg[off:], root)
		if i < 0 {
			return -1
		}
		i += off
		after := i + len(root)
		beforeOK := i == 0 || !isPathByte(msg[i-1])
		afterOK := after == len(msg) || msg[after] == '/' || isEnd(msg[after])
		if beforeOK && afterOK {
			return i
		}
		off = i + 1
	}
}

// isEnd reports whether c ends a path in a message.
func isEnd(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '"', '\'', '`', ':', ',', ';', ')', ']', '}', '>':
		return true
	}
	return false
}

func isPathByte(c byte) bool {
	return c == '/' || c == '.' || c == '-' || c == '_' || c == '~' ||
		('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// Error returns err with the paths redacted from its message; errors.Is
// and errors.As still see err's chain. Nil for nil.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := r.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redacted{err: err, msg: msg}
}

type redacted struct {
	err error
	msg string
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Relative returns err with every path below dir in its message made
// relative to dir ("/x/layout/blobs/a" -> "blobs/a" for dir "/x/layout"),
// for errors about files whose names inside dir mean something to the
// caller (an uploaded archive's own entries). The chain is kept.
func Relative(err error, dir string) error {
	if err == nil || dir == "" {
		return err
	}
	prefix := filepath.Clean(dir) + "/"
	msg := err.Error()
	if !strings.Contains(msg, prefix) {
		return err
	}
	return &redacted{err: err, msg: strings.ReplaceAll(msg, prefix, "")}
}
