package manager

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// A snapshot travels between nodes as one tar stream: first
// transferRecord (its record), then its runtime's files under
// transferFiles, directories and regular files only.
const (
	transferRecord = "snapshot.json"
	transferFiles  = "files/"
	// maxTransferEntries bounds the entries of an imported snapshot (a
	// checkpoint is a handful of files).
	maxTransferEntries = 4096
	// maxTransferRecord bounds its record.
	maxTransferRecord = 1 << 20
)

// transferred is a snapshot's record as it travels: the spec's secret
// values are never encoded with it, so they go beside it.
type transferred struct {
	Snapshot  *sandbox.Snapshot `json:"snapshot"`
	SecretEnv map[string]string `json:"secret_env,omitempty"`
}

// Export writes snapshot ref (id or name) to w as one tar stream that
// Import on another daemon reads. For the cluster's node-to-node
// transfer; never served to API callers (the record holds the spec's
// secret values).
func (s Snapshots) Export(ctx context.Context, ref string, w io.Writer) error {
	rec, err := s.Get(ctx, ref)
	if err != nil {
		return err
	}
	if _, err := os.Stat(rec.Dir); err != nil {
		return fmt.Errorf("%w: snapshot %s has lost its files: %v", errdefs.ErrFailedPrecondition, rec.ID, err)
	}
	out := *rec
	out.Dir = ""
	env := out.Spec.SecretEnv
	out.Spec.SecretEnv = nil
	head, err := json.Marshal(transferred{Snapshot: &out, SecretEnv: env})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: transferRecord, Mode: 0o600, Size: int64(len(head))}); err != nil {
		return err
	}
	if _, err := tw.Write(head); err != nil {
		return err
	}
	err = filepath.WalkDir(rec.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == rec.Dir {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(rec.Dir, path)
		if err != nil {
			return err
		}
		return exportEntry(tw, path, transferFiles+filepath.ToSlash(rel), d)
	})
	if err != nil {
		return fmt.Errorf("exporting snapshot %s: %w", rec.ID, err)
	}
	return tw.Close()
}

func exportEntry(tw *tar.Writer, path, name string, d fs.DirEntry) error {
	switch {
	case d.IsDir():
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o700})
	case !d.Type().IsRegular():
		return fmt.Errorf("%s is neither a file nor a directory", name)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: fi.Size()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// Import reads a snapshot written by Export on another daemon and keeps
// it under the same id and name. It refuses, before writing a byte, a
// snapshot this daemon could not restore (another runtime, another
// version of it, an agent protocol it does not speak, an image it does
// not have) and one it already has; the files must fit in the snapshot
// directory's free disk (less the kept minimum) and stay inside the new
// snapshot's directory.
func (s Snapshots) Import(ctx context.Context, r io.Reader) (*sandbox.Snapshot, error) {
	m := s.m
	tr := tar.NewReader(r)
	rec, err := readTransferRecord(tr)
	if err != nil {
		return nil, err
	}
	if err := m.checkCompatible(ctx, rec); err != nil {
		return nil, err
	}
	if _, err := m.records.GetSnapshot(ctx, rec.ID); err == nil {
		return nil, fmt.Errorf("%w: snapshot %s is here already", errdefs.ErrAlreadyExists, rec.ID)
	}
	if rec.Name != "" {
		if _, err := m.records.GetSnapshot(ctx, rec.Name); err == nil {
			return nil, fmt.Errorf("%w: a snapshot named %q exists here", errdefs.ErrAlreadyExists, rec.Name)
		}
	}
	if d := rec.Spec.ImageDigest; d != "" && m.cfg.Images != nil {
		if _, err := m.cfg.Images.Resolve(d); err != nil {
			return nil, fmt.Errorf("%w: snapshot %s runs on image %s, which this node does not have: %v", errdefs.ErrFailedPrecondition, rec.ID, d, err)
		}
	}
	free, err := freeBytes(m.cfg.snapshotsDir())
	if err != nil {
		return nil, err
	}
	limit := free - m.cfg.SnapshotQuota.withDefaults().MinFreeMB<<20
	rec.Dir = filepath.Join(m.cfg.snapshotsDir(), rec.ID)
	// A directory of its own: two imports of one snapshot at once each
	// write their own, and the second rename finds the first's in place.
	// A daemon stopped mid-import leaves it unrecorded, and reconcile
	// removes it.
	tmp, err := os.MkdirTemp(m.cfg.snapshotsDir(), rec.ID+".import-")
	if err != nil {
		return nil, err
	}
	if err := untarSnapshot(ctx, tr, tmp, limit); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("importing snapshot %s: %w", rec.ID, err)
	}
	if err := os.Rename(tmp, rec.Dir); err != nil {
		os.RemoveAll(tmp)
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			return nil, fmt.Errorf("%w: snapshot %s is being imported here already", errdefs.ErrAlreadyExists, rec.ID)
		}
		return nil, err
	}
	rec.SizeBytes = diskUsage(rec.Dir)
	if err := m.keep(ctx, rec); err != nil {
		os.RemoveAll(rec.Dir)
		return nil, err
	}
	m.log.InfoContext(ctx, "memory snapshot imported", "snapshot", rec.ID, "runtime", rec.Runtime, "bytes", rec.SizeBytes)
	return rec, nil
}

// readTransferRecord reads the stream's first entry, the record, and
// checks what later steps rely on: a snapshot id, a valid name.
func readTransferRecord(tr *tar.Reader) (*sandbox.Snapshot, error) {
	h, err := tr.Next()
	if err != nil {
		return nil, errdefs.Invalid("body", "not a snapshot stream: %v", err)
	}
	if h.Name != transferRecord || h.Typeflag != tar.TypeReg || h.Size > maxTransferRecord {
		return nil, errdefs.Invalid("body", "a snapshot stream begins with its record (%s of at most %d bytes), not %q", transferRecord, maxTransferRecord, h.Name)
	}
	var t transferred
	if err := json.NewDecoder(io.LimitReader(tr, maxTransferRecord)).Decode(&t); err != nil || t.Snapshot == nil {
		return nil, errdefs.Invalid("body", "the snapshot's record: %v", err)
	}
	rec := t.Snapshot
	if !ids.Snapshot(rec.ID) {
		return nil, errdefs.Invalid("body", "the snapshot's id %q is not a snapshot id", rec.ID)
	}
	if rec.Name != "" && !sandbox.ValidSnapshotName(rec.Name) {
		return nil, errdefs.Invalid("body", "the snapshot's name %q is not a snapshot name", rec.Name)
	}
	rec.Spec.SecretEnv = t.SecretEnv
	return rec, nil
}

// untarSnapshot writes the stream's files into dir (new and empty):
// directories and regular files only, each named by a local path under
// transferFiles, none twice, limit bytes in all.
func untarSnapshot(ctx context.Context, tr *tar.Reader, dir string, limit int64) error {
	var total int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errdefs.Invalid("body", "reading the snapshot stream: %v", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if n >= maxTransferEntries {
			return errdefs.Invalid("body", "more than %d entries", maxTransferEntries)
		}
		rel, ok := strings.CutPrefix(strings.TrimSuffix(h.Name, "/"), transferFiles)
		if !ok || !filepath.IsLocal(rel) || filepath.Clean(rel) != rel {
			return errdefs.Invalid("body", "entry %q: not a path inside the snapshot's files", h.Name)
		}
		// No entry can be a link, so joining a local path stays in dir.
		path := filepath.Join(dir, rel)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(path, 0o700); err != nil {
				return errdefs.Invalid("body", "entry %q: %v", h.Name, err)
			}
		case tar.TypeReg:
			if total += h.Size; h.Size < 0 || total > limit {
				return fmt.Errorf("%w: the snapshot's files need more than the %d MiB free for snapshots", errdefs.ErrResourceExhausted, mib(max(limit, 0)))
			}
			if err := writeEntry(tr, path, h.Size); err != nil {
				return errdefs.Invalid("body", "entry %q: %v", h.Name, err)
			}
		default:
			return errdefs.Invalid("body", "entry %q: only files and directories, not type %q", h.Name, h.Typeflag)
		}
	}
}

func writeEntry(r io.Reader, path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// checkCompatible refuses a snapshot this daemon's runtimes cannot
// restore (checkRestorable without its files).
func (m *Manager) checkCompatible(ctx context.Context, rec *sandbox.Snapshot) error {
	rt := m.cfg.Runtimes[rec.Runtime]
	if rt == nil {
		return fmt.Errorf("%w: snapshot %s was taken by runtime %q, which this daemon does not run", errdefs.ErrFailedPrecondition, rec.ID, rec.Runtime)
	}
	if _, ok := rt.(runtime.Snapshotter); !ok {
		return fmt.Errorf("%w: runtime %s cannot restore memory snapshots", errdefs.ErrNotSupported, rec.Runtime)
	}
	v, err := m.runtimeVersion(ctx, rt)
	if err != nil {
		return err
	}
	return sameRuntime(rec, v)
}

// RuntimeVersions names the version of each runtime that takes memory
// snapshots (what their records carry, and what a restore must match),
// for a cluster node's registration. A runtime whose version cannot be
// read is left out, with the error.
func (m *Manager) RuntimeVersions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	for name, rt := range m.cfg.Runtimes {
		if _, ok := rt.(runtime.Snapshotter); !ok {
			continue
		}
		v, err := m.runtimeVersion(ctx, rt)
		if err != nil {
			errs = append(errs, fmt.Errorf("runtime %s's version: %w", name, err))
			continue
		}
		out[name] = v
	}
	return out, errors.Join(errs...)
}
