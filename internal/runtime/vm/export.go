package vm

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"corral/internal/agentapi"
	"corral/internal/image/overlaytar"
	"corral/internal/runtime"
)

// ExportChanges writes the guest's writable layer as an OCI layer tar. The
// upper directory of the guest's root overlay lives on the scratch disk,
// which only the guest can read while it runs, so the agent tars it
// (overlayfs form) and overlaytar converts it, leaving out what the guest's
// boot itself put there: the agent's resolv.conf, /.corral, and the mount
// point of the kernel's modules (/lib is a link to usr/lib in Debian). A
// layer whose files hold more than the scratch disk (a sparse file, whose
// holes would come out as zeros) is refused at the file that passes it.
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
	st, err := overlaytar.Convert(rc, w, overlaytar.Options{Exclude: exclude, MaxBytes: scratchBytes(ref.Dir)})
	if err != nil {
		return runtime.ExportStats{}, fmt.Errorf("exporting sandbox %s: %w", ref.ID, err)
	}
	return runtime.ExportStats{Entries: st.Entries, Skipped: st.Skipped, SkippedCount: st.SkippedCount}, nil
}

// scratchBytes is the size of the sandbox's scratch disk, which bounds
// what its writable layer holds (0, no bound, when it cannot be read).
func scratchBytes(dir string) int64 {
	rec, err := loadMachine(dir)
	if err != nil {
		return 0
	}
	scratch := rec.Scratch
	if !filepath.IsAbs(scratch) {
		scratch = filepath.Join(dir, scratch)
	}
	fi, err := os.Stat(scratch)
	if err != nil {
		return 0
	}
	return fi.Size()
}
