package vm

import (
	"context"
	"fmt"
	"io"
	"path"

	"corral/internal/agentapi"
	"corral/internal/image/overlaytar"
	"corral/internal/runtime"
)

// ExportChanges writes the guest's writable layer as an OCI layer tar. The
// upper directory of the guest's root overlay lives on the scratch disk,
// which only the guest can read while it runs, so the agent tars it
// (overlayfs form) and overlaytar converts it, leaving out what the guest's
// boot itself put there: the agent's resolv.conf, /.corral, and the mount
// point of the kernel's modules (/lib is a link to usr/lib in Debian).
func (r *Runtime) ExportChanges(ctx context.Context, ref runtime.Ref, agent *agentapi.Client, w io.Writer) (runtime.ExportStats, error) {
	if err := ref.Check(); err != nil {
		return runtime.ExportStats{}, err
	}
	if agent == nil {
		return runtime.ExportStats{}, fmt.Errorf("exporting sandbox %s: no agent connection", ref.ID)
	}
	rc, err := agent.ExportUpper(ctx)
	if err != nil {
		return runtime.ExportStats{}, fmt.Errorf("exporting sandbox %s: %w", ref.ID, err)
	}
	defer rc.Close()
	exclude := append([]string{"/.corral",
		path.Join("/lib/modules", r.kernel.release), path.Join("/usr/lib/modules", r.kernel.release),
	}, agentapi.RuntimeWrittenFiles...)
	st, err := overlaytar.Convert(rc, w, overlaytar.Options{Exclude: exclude})
	if err != nil {
		return runtime.ExportStats{}, fmt.Errorf("exporting sandbox %s: %w", ref.ID, err)
	}
	return runtime.ExportStats{Entries: st.Entries, Skipped: st.Skipped, SkippedCount: st.SkippedCount}, nil
}
