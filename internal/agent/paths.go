package agent

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"

	"corral/internal/errdefs"
	"corral/internal/fspath"
)

// nonBlockNoFollow opens without following a final symlink (the resolver
// already followed every link it saw, so one here is a race) and without
// blocking on a FIFO a sandbox process left in the way.
const nonBlockNoFollow = syscall.O_NONBLOCK | syscall.O_NOFOLLOW

// sandboxPath turns a path from the daemon into an absolute path inside the
// sandbox: relative paths start at home. It does not touch the filesystem.
func sandboxPath(p, home string) (string, error) {
	if p == "" {
		return "", errdefs.Invalid("path", "empty")
	}
	if len(p) > fspath.MaxPathLen {
		return "", errdefs.Invalid("path", "longer than %d bytes", fspath.MaxPathLen)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errdefs.Invalid("path", "contains a NUL byte")
	}
	if !strings.HasPrefix(p, "/") {
		p = home + "/" + p
	}
	return path.Clean(p), nil
}

// resolve maps a sandbox path to a host path inside the root, following a
// final symlink or not.
func (s *Server) resolve(sandbox string, follow bool) (string, error) {
	resolveFn := fspath.ResolveNoFollow
	if follow {
		resolveFn = fspath.Resolve
	}
	host, err := resolveFn(s.root, sandbox)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EINVAL) ||
			errors.Is(err, syscall.ENAMETOOLONG) {
			return "", fmt.Errorf("%w: resolving %s: %v", errdefs.ErrInvalidArgument, sandbox, err)
		}
		return "", fsError("resolving", sandbox, err)
	}
	return host, nil
}

// homeOf returns the home directory of a user spec ("" is root), for
// resolving relative paths.
func (s *Server) homeOf(user string) (string, error) {
	acct, err := s.lookupUser(user)
	if err != nil {
		return "", err
	}
	return acct.home, nil
}

// absPath makes a path from the daemon absolute inside the sandbox for user
// ("" is root); /etc/passwd is read only for a relative path.
func (s *Server) absPath(p, user string) (string, error) {
	home := rootAccount.home
	if p != "" && !strings.HasPrefix(p, "/") {
		var err error
		if home, err = s.homeOf(user); err != nil {
			return "", err
		}
	}
	return sandboxPath(p, home)
}

// hostPath resolves a path from the daemon for user ("" is root).
func (s *Server) hostPath(p, user string, follow bool) (sandbox, host string, err error) {
	if sandbox, err = s.absPath(p, user); err != nil {
		return "", "", err
	}
	host, err = s.resolve(sandbox, follow)
	return sandbox, host, err
}
