// Package fspath resolves hostile paths inside a root directory.
//
// It implements the RESOLVE_IN_ROOT semantics of openat2(2) in pure Go: the
// path is first cleaned lexically, so that ".." cannot climb above the root,
// and then walked one component at a time with Lstat. A symlink met on the
// way is replaced by its target, which is itself resolved inside the root:
// an absolute target restarts at the root, a relative one continues from the
// link's directory, and ".." in a target stops at the root. At most MaxLinks
// symlinks are followed; beyond that the error wraps syscall.ELOOP.
//
// The result is a host path under the root whose existing components contain
// no symlinks at the time of the walk. Components that do not exist (yet) are
// appended lexically. Like every userspace resolver it is subject to races
// with a concurrent writer inside the root; callers open the result with
// O_NOFOLLOW where that matters, and MkdirAll never follows a symlink.
//
// This package imports only the standard library.
package fspath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MaxLinks is the number of symlinks a single resolution may follow, the
// same limit as the kernel's (MAXSYMLINKS).
const MaxLinks = 40

// MaxPathLen bounds the length of an input path (PATH_MAX).
const MaxPathLen = 4096

// Resolve returns the host path that path names inside root, following
// symlinks in every component, the last included.
func Resolve(root, path string) (string, error) {
	return resolve(root, path, true)
}

// ResolveNoFollow is like Resolve but leaves the last component as it is:
// a final symlink names the link itself (lstat, unlink and rename semantics).
func ResolveNoFollow(root, path string) (string, error) {
	return resolve(root, path, false)
}

// Rel turns a host path returned by Resolve back into the absolute path seen
// inside the root ("/" for the root itself).
func Rel(root, host string) string {
	root = filepath.Clean(root)
	rel, err := filepath.Rel(root, host)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "/"
	}
	return "/" + rel
}

func checkInput(root, path string) error {
	if !filepath.IsAbs(root) {
		return fmt.Errorf("root %q is not absolute: %w", root, syscall.EINVAL)
	}
	if len(path) > MaxPathLen {
		return fmt.Errorf("path too long (%d bytes): %w", len(path), syscall.ENAMETOOLONG)
	}
	if strings.IndexByte(path, 0) >= 0 {
		return fmt.Errorf("path contains a NUL byte: %w", syscall.EINVAL)
	}
	return nil
}

// resolve walks path inside root. current is always a clean path relative
// to root ("" for the root) whose components exist and are not symlinks,
// or, once a component is missing, the lexical rest of the path.
func resolve(root, path string, followLast bool) (string, error) {
	if err := checkInput(root, path); err != nil {
		return "", err
	}
	root = filepath.Clean(root)
	remaining := strings.TrimPrefix(filepath.Clean("/"+path), "/")
	current := ""
	links := 0
	for remaining != "" {
		var part string
		part, remaining, _ = strings.Cut(remaining, "/")
		remaining = strings.TrimLeft(remaining, "/")
		switch part {
		case "", ".":
			continue
		case "..":
			current = parent(current)
			continue
		}
		next := join(current, part)
		if remaining == "" && !followLast {
			current = next
			break
		}
		target, isLink, err := readLink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if !isLink {
			current = next
			continue
		}
		links++
		if links > MaxLinks {
			return "", fmt.Errorf("resolving %q: more than %d symlinks: %w", path, MaxLinks, syscall.ELOOP)
		}
		if strings.HasPrefix(target, "/") {
			current = ""
		}
		remaining = strings.TrimLeft(target, "/") + "/" + remaining
		remaining = strings.TrimRight(remaining, "/")
	}
	return filepath.Join(root, current), nil
}

// readLink reports whether host is a symlink and, if so, its target. A
// missing component (or a non-directory in the middle of the path) is not an
// error: the rest of the path is then taken lexically.
func readLink(host string) (string, bool, error) {
	fi, err := os.Lstat(host)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return "", false, nil
		}
		return "", false, err
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		return "", false, nil
	}
	target, err := os.Readlink(host)
	if err != nil {
		return "", false, err
	}
	if strings.IndexByte(target, 0) >= 0 || len(target) > MaxPathLen {
		return "", false, fmt.Errorf("symlink %q has an invalid target: %w", host, syscall.EINVAL)
	}
	return target, true, nil
}

func parent(rel string) string {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ""
	}
	return rel[:i]
}

func join(rel, part string) string {
	if rel == "" {
		return part
	}
	return rel + "/" + part
}

// MkdirAll creates path inside root and any missing parents, like mkdir -p,
// and returns its host path. Existing components are resolved as in Resolve;
// the directories it creates are made with mkdir, which never follows a
// symlink, and a component that turns out to be anything but a directory is
// an error (ENOTDIR), so a concurrent writer cannot redirect it outside root.
func MkdirAll(root, path string, perm os.FileMode) (string, error) {
	return MkdirAllAs(root, path, perm, -1, -1)
}

// MkdirAllAs is MkdirAll that gives every directory it creates (not the
// ones that exist) to uid:gid; a negative uid leaves the owner alone. The
// owner is changed with lchown, so a directory swapped for a symlink
// meanwhile changes nothing outside root.
func MkdirAllAs(root, path string, perm os.FileMode, uid, gid int) (string, error) {
	host, err := Resolve(root, path)
	if err != nil {
		return "", err
	}
	root = filepath.Clean(root)
	rel := strings.TrimPrefix(Rel(root, host), "/")
	dir := root
	for _, part := range strings.Split(rel, "/") {
		if part == "" {
			continue
		}
		dir = filepath.Join(dir, part)
		made, err := mkdirOne(dir, perm)
		if err != nil {
			return "", err
		}
		if made && uid >= 0 {
			if err := os.Lchown(dir, uid, gid); err != nil {
				return "", err
			}
		}
	}
	return host, nil
}

// mkdirOne makes dir, reporting whether it did (false: it was there).
func mkdirOne(dir string, perm os.FileMode) (bool, error) {
	err := os.Mkdir(dir, perm)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return false, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	}
	return false, nil
}
