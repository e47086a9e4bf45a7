package agent

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/fspath"
)

// Defaults for created files and directories.
const (
	defaultFileMode = 0o644
	defaultDirMode  = 0o755
)

// fsWrite is PUT /v1/files?path=P[&mode=0644][&user=U][&inplace=1][&xattrs=J]: the body
// is streamed into a temporary file beside the target, then renamed over
// it, so readers never see a partial file; with inplace=1 it is written
// into the target itself (truncated, or created), as E2B's envd does, so a
// watcher sees the file written (an agent without inplace ignores it).
// Missing parent directories are created, owned like the file. With xattrs
// (an agentapi.XattrSet, protocol 4) the file's extended attributes under
// its prefix are replaced before the write completes (fs_xattrs.go).
func (s *Server) fsWrite(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	mode, hasMode, err := parseMode(q.Get("mode"))
	if err != nil {
		return err
	}
	xw := &xattrWrite{}
	if xw.set, err = agentapi.ParseXattrs(q.Get(agentapi.QueryXattrs)); err != nil {
		return err
	}
	acct, err := s.lookupUser(q.Get("user"))
	if err != nil {
		return err
	}
	sandbox, err := sandboxPath(q.Get("path"), acct.home)
	if err != nil {
		return err
	}
	host, err := s.resolve(sandbox, true)
	if err != nil {
		return err
	}
	if host == s.root {
		return errdefs.Invalid("path", "cannot write over the root")
	}
	if fi, err := os.Lstat(host); err == nil && fi.IsDir() {
		return errdefs.Invalid("path", "%s is a directory", sandbox)
	}
	if !hasMode {
		mode = existingMode(host)
	}
	uid, gid := owner(acct, q.Get("user") != "")
	dir, err := fspath.MkdirAllAs(s.root, fspath.Rel(s.root, filepath.Dir(host)), defaultDirMode, uid, gid)
	if err != nil {
		return fsError("creating parent of", sandbox, err)
	}
	write := s.writeAtomic
	if q.Get("inplace") == "1" {
		write = s.writeInPlace
	}
	if err := write(r.Body, dir, host, mode, acct, q.Get("user") != "", xw); err != nil {
		return fsError("writing", sandbox, err)
	}
	info, err := s.entryInfo(host, s.newIDNames())
	if err != nil {
		return fsError("stat", sandbox, err)
	}
	info.Xattrs, info.XattrsUnsupported = xw.got, xw.unsupported
	writeJSON(w, http.StatusOK, info)
	return nil
}

// owner is the uid:gid a file request gives what it creates: the
// account's when the request named a user, else -1 (leave the agent's,
// root's).
func owner(acct account, named bool) (int, int) {
	if !named {
		return -1, -1
	}
	return int(acct.uid), int(acct.gid)
}

// writeAtomic copies body into a new temporary file in dir and renames it
// to host. The temporary file is created with O_EXCL under a random name,
// so nothing the sandbox planted can redirect it.
func (s *Server) writeAtomic(body io.Reader, dir, host string, mode uint32, acct account, chown bool, xw *xattrWrite) (err error) {
	tmp, err := os.CreateTemp(dir, ".corral-upload-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.CopyBuffer(tmp, onlyReader{body}, make([]byte, copyChunk)); err != nil {
		return fmt.Errorf("%w: receiving the body: %v", errdefs.ErrUnavailable, err)
	}
	if err = tmp.Chmod(agentapi.FileMode(mode)); err != nil {
		return err
	}
	if chown {
		if err = tmp.Chown(int(acct.uid), int(acct.gid)); err != nil {
			return err
		}
	}
	if err = xw.apply(tmp); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), host)
}

// writeInPlace copies body into host itself: opened without following a
// final symlink (resolve already followed the ones the sandbox made),
// created with mode, or truncated keeping its mode and owner. A failed
// write removes a file it created; an existing file keeps what was
// written, as with envd.
func (s *Server) writeInPlace(body io.Reader, _, host string, mode uint32, acct account, chown bool, xw *xattrWrite) (err error) {
	// O_NONBLOCK: a FIFO planted at the path fails the open (ENXIO)
	// instead of hanging it; it changes nothing for a regular file.
	const flags = os.O_WRONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	f, err := os.OpenFile(host, flags|os.O_CREATE|os.O_EXCL, agentapi.FileMode(mode))
	created := err == nil
	if errors.Is(err, os.ErrExist) {
		f, err = os.OpenFile(host, flags, 0)
	}
	if errors.Is(err, syscall.ENXIO) {
		return fmt.Errorf("%w: not a regular file", errdefs.ErrInvalidArgument)
	}
	if err != nil {
		return err
	}
	defer func() {
		f.Close()
		if err != nil && created {
			os.Remove(host)
		}
	}()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file", errdefs.ErrInvalidArgument)
	}
	if !created {
		if err := f.Truncate(0); err != nil {
			return err
		}
	} else {
		// Only where the umask took bits: a watcher sees no needless chmod.
		const bits = os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky
		if want := agentapi.FileMode(mode); fi.Mode()&bits != want&bits {
			if err := f.Chmod(want); err != nil {
				return err
			}
		}
		if chown {
			if err := f.Chown(int(acct.uid), int(acct.gid)); err != nil {
				return err
			}
		}
	}
	if _, err := io.CopyBuffer(f, onlyReader{body}, make([]byte, copyChunk)); err != nil {
		return fmt.Errorf("%w: receiving the body: %v", errdefs.ErrUnavailable, err)
	}
	if err := xw.apply(f); err != nil {
		return err
	}
	return f.Close()
}

// parseMode parses an octal mode query parameter ("0644").
func parseMode(s string) (uint32, bool, error) {
	if s == "" {
		return 0, false, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, false, errdefs.Invalid("mode", "%q is not an octal mode", s)
	}
	return uint32(m), true, nil
}

// existingMode keeps the mode of the file being replaced; a new file gets
// defaultFileMode.
func existingMode(host string) uint32 {
	if fi, err := os.Lstat(host); err == nil && fi.Mode().IsRegular() {
		return agentapi.UnixMode(fi.Mode())
	}
	return defaultFileMode
}
