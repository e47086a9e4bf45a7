package manager

import (
	"context"
	"fmt"
	"io"

	"corral/internal/errdefs"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// ExportChanges writes what a running sandbox changed in its root
// filesystem as an OCI layer tar (see runtime.ChangeExporter). The
// sandbox's operation lock is held, so it is not terminated meanwhile.
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
	if st := l.state(); st != sandbox.Running {
		return runtime.ExportStats{}, fmt.Errorf("%w: sandbox %s is %s, not running", errdefs.ErrFailedPrecondition, id, st)
	}
	return ex.ExportChanges(ctx, l.ref, client, w)
}
