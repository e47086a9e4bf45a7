package agent

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// maxListEntries bounds one listing; the sandbox can make huge directories.
const maxListEntries = 100_000

// fsList is GET /v1/fs/list?path=P[&depth=1][&user=U][&xattrs=PREFIX]: the entries
// below a directory, depth levels deep, with xattrs (protocol 4) each with
// its extended attributes under that prefix. Symlinks are listed, never
// descended into.
func (s *Server) fsList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	prefix, err := xattrPrefix(q.Get(agentapi.QueryXattrs))
	if err != nil {
		return err
	}
	depth := 1
	if d := q.Get("depth"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 || n > agentapi.MaxListDepth {
			return errdefs.Invalid("depth", "%q is not in 1..%d", d, agentapi.MaxListDepth)
		}
		depth = n
	}
	sandbox, host, err := s.hostPath(q.Get("path"), q.Get("user"), true)
	if err != nil {
		return err
	}
	fi, err := os.Stat(host)
	if err != nil {
		return fsError("listing", sandbox, err)
	}
	if !fi.IsDir() {
		return errdefs.Invalid("path", "%s is not a directory", sandbox)
	}
	l := &lister{s: s, ids: s.newIDNames(), entries: []agentapi.EntryInfo{}, prefix: prefix}
	if err := l.walk(host, depth); err != nil {
		return fsError("listing", sandbox, err)
	}
	writeJSON(w, http.StatusOK, agentapi.DirList{Entries: l.entries})
	return nil
}

// lister collects a bounded recursive listing.
type lister struct {
	s       *Server
	ids     *idNames
	entries []agentapi.EntryInfo
	prefix  string // extended attributes to add ("": none)
}

// walk lists dir, reading it in batches so a huge directory is not loaded
// whole; subdirectories that vanish or cannot be read are skipped.
func (l *lister) walk(dir string, depth int) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		batch, err := f.ReadDir(1024)
		for _, de := range batch {
			if err := l.add(dir, de, depth); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (l *lister) add(dir string, de os.DirEntry, depth int) error {
	fi, err := de.Info()
	if err != nil {
		return nil // removed meanwhile
	}
	if len(l.entries) >= maxListEntries {
		return fmt.Errorf("%w: more than %d entries", errdefs.ErrResourceExhausted, maxListEntries)
	}
	host := filepath.Join(dir, de.Name())
	l.entries = append(l.entries, withXattrs(l.s.entryFrom(host, fi, l.ids), host, l.prefix))
	if depth > 1 && fi.IsDir() {
		if err := l.walk(host, depth-1); errors.Is(err, errdefs.ErrResourceExhausted) {
			return err
		}
	}
	return nil
}
