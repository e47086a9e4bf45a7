package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/fspath"
	"corral/internal/image/overlaytar"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// Files is the file service: the files of running sandboxes, through their
// agents, with the defaults an exec gets. User (empty: the sandbox's
// default user) owns what a call creates, and a relative path resolves
// against the sandbox's workdir (or, with none, the user's home); see
// FromHome for the other rule.
type Files struct {
	m *Manager
	// fromHome: relative paths resolve against the user's home.
	fromHome bool
}

// FromHome is the file service with E2B's envd rule: a relative path
// resolves against the home of the user the call runs as (the agent reads
// it from the sandbox's /etc/passwd), never against the sandbox's workdir.
func (s Files) FromHome() Files {
	s.fromHome = true
	return s
}

// resolvePath is p as the agent gets it: unchanged where relative paths
// start at the user's home, else resolved against the workdir.
func (s Files) resolvePath(workdir, p string) string {
	if s.fromHome {
		return p
	}
	return inWorkdir(workdir, p)
}

// target is a file call's agent, user and resolved path.
type target struct {
	*acquired
	user, path string
}

// open acquires sandbox id's agent for one call on path as user.
func (s Files) open(ctx context.Context, id, path, user string) (*target, error) {
	a, err := s.m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	return &target{acquired: a, user: or(user, a.rec.Spec.User), path: s.resolvePath(a.rec.Spec.Workdir, path)}, nil
}

// Read opens a file for reading: its body and size. The sandbox counts as
// active until the body is closed.
func (s Files) Read(ctx context.Context, id, path, user string) (io.ReadCloser, int64, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return nil, 0, err
	}
	body, size, err := t.agent.ReadFile(ctx, t.path, t.user)
	if err != nil {
		t.release()
		return nil, 0, err
	}
	return &releasingBody{ReadCloser: body, release: t.release}, size, nil
}

// releasingBody releases a sandbox's activity when closed (the release of
// an acquire may be called more than once).
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// Write streams r into path atomically, creating missing parents; a zero
// mode keeps an existing file's mode (0644 for a new one).
func (s Files) Write(ctx context.Context, id, path string, r io.Reader, mode os.FileMode, user string) (agentapi.EntryInfo, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return agentapi.EntryInfo{}, err
	}
	defer t.release()
	r, done := s.m.auditWrite(ctx, id, t.path, r)
	e, err := t.agent.WriteFile(ctx, t.path, r, mode, t.user)
	done(err)
	return e, err
}

// WriteInPlace is Write into the file itself (agentapi's
// WriteFileInPlace): watchers see it written, readers may see it partial.
func (s Files) WriteInPlace(ctx context.Context, id, path string, r io.Reader, mode os.FileMode, user string) (agentapi.EntryInfo, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return agentapi.EntryInfo{}, err
	}
	defer t.release()
	r, done := s.m.auditWrite(ctx, id, t.path, r)
	e, err := t.agent.WriteFileInPlace(ctx, t.path, r, mode, t.user)
	done(err)
	return e, err
}

// Stat describes path (a final symlink itself).
func (s Files) Stat(ctx context.Context, id, path, user string) (agentapi.EntryInfo, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return agentapi.EntryInfo{}, err
	}
	defer t.release()
	return t.agent.Stat(ctx, t.path, t.user)
}

// List lists a directory depth levels deep.
func (s Files) List(ctx context.Context, id, path string, depth int, user string) ([]agentapi.EntryInfo, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return nil, err
	}
	defer t.release()
	return t.agent.ListDir(ctx, t.path, depth, t.user)
}

// MakeDir creates path and its missing parents.
func (s Files) MakeDir(ctx context.Context, id, path string, mode os.FileMode, user string) (agentapi.EntryInfo, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return agentapi.EntryInfo{}, err
	}
	defer t.release()
	return t.agent.MakeDir(ctx, t.path, mode, t.user)
}

// Remove removes path; a non-empty directory needs recursive.
func (s Files) Remove(ctx context.Context, id, path string, recursive bool, user string) error {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return err
	}
	defer t.release()
	err = t.agent.Remove(ctx, t.path, recursive, t.user)
	s.m.auditFile(ctx, id, "file_remove", map[string]string{"path": t.path, "recursive": strconv.FormatBool(recursive)}, err)
	return err
}

// Rename renames from to to (both resolved alike).
func (s Files) Rename(ctx context.Context, id, from, to, user string) (agentapi.EntryInfo, error) {
	t, err := s.open(ctx, id, from, user)
	if err != nil {
		return agentapi.EntryInfo{}, err
	}
	defer t.release()
	dst := s.resolvePath(t.rec.Spec.Workdir, to)
	e, err := t.agent.Rename(ctx, t.path, dst, t.user)
	s.m.auditFile(ctx, id, "file_rename", map[string]string{"path": t.path, "to": dst}, err)
	return e, err
}

// Chmod changes path's mode bits.
func (s Files) Chmod(ctx context.Context, id, path string, mode os.FileMode, user string) (agentapi.EntryInfo, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return agentapi.EntryInfo{}, err
	}
	defer t.release()
	return t.agent.Chmod(ctx, t.path, mode, t.user)
}

// Watch opens a watch of directory path (recursive: and of every
// directory below it, as they appear) and returns its event stream once
// the watch is set up; closing the stream or cancelling ctx ends it. The
// watch counts as activity only while it is set up: an open watch does
// not keep the sandbox from its idle timeout, and a pause or the end of
// the sandbox ends the stream. An agent older than protocol 2 is
// ErrNotSupported, naming its version.
func (s Files) Watch(ctx context.Context, id, path string, recursive bool, user string) (*agentapi.WatchStream, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return nil, err
	}
	defer t.release()
	ws, err := t.agent.Watch(ctx, t.path, recursive, t.user)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return ws, nil
}

// ExportChanges writes what a running sandbox changed in its root
// filesystem as an OCI layer tar (see runtime.ChangeExporter), without
// whiteouts that hide nothing in its image. The sandbox's lifecycle lock
// is held, so it is not terminated meanwhile.
func (s Files) ExportChanges(ctx context.Context, id string, w io.Writer) (runtime.ExportStats, error) {
	a, err := s.m.acquire(ctx, id)
	if err != nil {
		return runtime.ExportStats{}, err
	}
	defer a.release()
	ex, ok := a.h.Runtime().(runtime.ChangeExporter)
	if !ok {
		return runtime.ExportStats{}, fmt.Errorf("%w: runtime %s cannot export a sandbox's filesystem", errdefs.ErrNotSupported, a.h.Runtime().Name())
	}
	a.h.Lock()
	defer a.h.Unlock()
	rec := a.h.Record()
	if rec.State != sandbox.Running {
		return runtime.ExportStats{}, fmt.Errorf("%w: sandbox %s is %s, not running", errdefs.ErrFailedPrecondition, id, rec.State)
	}
	return s.m.exportLocked(ctx, a.h, ex, a.agent, w)
}

// exportLocked is ExportChanges for a caller that holds h's lock.
func (m *Manager) exportLocked(ctx context.Context, h *handle.Handle, ex runtime.ChangeExporter, agent *agentapi.Client, w io.Writer) (runtime.ExportStats, error) {
	lower, err := m.imageRoot(h.Record().Spec)
	if err != nil {
		return runtime.ExportStats{}, err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := overlaytar.DropStaleWhiteouts(pr, w, func(name string) bool { return existsIn(lower, name) })
		pr.CloseWithError(err)
		done <- err
	}()
	st, err := ex.ExportChanges(ctx, h.Ref(), agent, pw)
	pw.CloseWithError(err)
	if ferr := <-done; err == nil && ferr != nil {
		err = fmt.Errorf("exporting sandbox %s: %w", h.ID(), ferr)
	}
	return st, err
}

// existsIn reports whether name (relative) exists in root, resolving its
// parents inside root and not following the name itself.
func existsIn(root, name string) bool {
	p, err := fspath.ResolveNoFollow(root, "/"+name)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // undecided: keep the whiteout
	}
	_, err = os.Lstat(p)
	return err == nil || !errors.Is(err, os.ErrNotExist)
}
