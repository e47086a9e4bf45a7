package agent

import (
	"os"
	"path"
	"syscall"

	"corral/internal/agentapi"
	"corral/internal/fspath"
)

// entryInfo describes the entry at host without following a final symlink.
func (s *Server) entryInfo(host string, ids *idNames) (agentapi.EntryInfo, error) {
	fi, err := os.Lstat(host)
	if err != nil {
		return agentapi.EntryInfo{}, err
	}
	return s.entryFrom(host, fi, ids), nil
}

// entryFrom builds an EntryInfo from an lstat result.
func (s *Server) entryFrom(host string, fi os.FileInfo, ids *idNames) agentapi.EntryInfo {
	sandbox := fspath.Rel(s.root, host)
	e := agentapi.EntryInfo{
		Name:        path.Base(sandbox),
		Path:        sandbox,
		Type:        entryType(fi.Mode()),
		Size:        fi.Size(),
		Mode:        agentapi.UnixMode(fi.Mode()),
		Permissions: fi.Mode().String(),
		ModifiedAt:  fi.ModTime().UTC(),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = ids.user(st.Uid)
		e.Group = ids.group(st.Gid)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		if target, err := os.Readlink(host); err == nil {
			e.SymlinkTarget = target
		}
	}
	return e
}

func entryType(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return agentapi.EntryFile
	case m.IsDir():
		return agentapi.EntryDir
	case m&os.ModeSymlink != 0:
		return agentapi.EntrySymlink
	default:
		return agentapi.EntryOther
	}
}

// newIDNames returns a lazy uid/gid name cache for one request.
func (s *Server) newIDNames() *idNames { return &idNames{s: s} }
