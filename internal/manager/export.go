package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"corral/internal/errdefs"
	"corral/internal/fspath"
	"corral/internal/image/overlaytar"
	imagestore "corral/internal/image/store"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// ExportChanges writes what a running sandbox changed in its root
// filesystem as an OCI layer tar (see runtime.ChangeExporter), without
// whiteouts that hide nothing in its image. The sandbox's operation lock
// is held, so it is not terminated meanwhile.
func (m *Manager) ExportChanges(ctx context.Context, id string, w io.Writer) (runtime.ExportStats, error) {
	client, l, release, err := m.agentFor(id)
	if err != nil {
		return runtime.ExportStats{}, err
	}
	defer release()
	ex, ok := l.rt.(runtime.ChangeExporter)
	if !ok {
		return runtime.ExportStats{}, fmt.Errorf("%w: runtime %s cannot export a sandbox's filesystem", errdefs.ErrNotSupported, l.rt.Name())
	}
	l.op.Lock()
	defer l.op.Unlock()
	sb := l.snapshot()
	if sb.State != sandbox.Running {
		return runtime.ExportStats{}, fmt.Errorf("%w: sandbox %s is %s, not running", errdefs.ErrFailedPrecondition, id, sb.State)
	}
	lower, err := m.imageRoot(sb.Spec)
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
	st, err := ex.ExportChanges(ctx, l.ref, client, pw)
	pw.CloseWithError(err)
	if ferr := <-done; err == nil && ferr != nil {
		err = fmt.Errorf("exporting sandbox %s: %w", id, ferr)
	}
	return st, err
}

// imageRoot is the root filesystem directory a sandbox's image gives it.
func (m *Manager) imageRoot(spec sandbox.Spec) (string, error) {
	if spec.Image == baseImage {
		return m.cfg.BaseRootFS, nil
	}
	if m.cfg.Images == nil || spec.ImageDigest == "" {
		return "", fmt.Errorf("%w: image %q is not in the store", errdefs.ErrFailedPrecondition, spec.Image)
	}
	return m.cfg.Images.RootFS(imagestore.Digest(spec.ImageDigest))
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
