package gvisor

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"corral/internal/agentapi"
	"corral/internal/image/overlaytar"
	"corral/internal/runtime"
)

// exportTimeout bounds runsc's serialisation of the writable layer (it
// writes from memory and the layer's file store, at disk speed).
const exportTimeout = 10 * time.Minute

// ExportChanges writes the sandbox's writable layer, everything it changed
// relative to its image, as an OCI layer tar. runsc serialises the
// sandbox's overlay upper layer (overlayfs format) into a file in the
// sandbox's directory; overlaytar turns it into OCI whiteouts, leaving out
// the files the agent writes at start. The sandbox keeps running; what
// its processes write while the export runs may or may not be included.
func (r *Runtime) ExportChanges(ctx context.Context, ref runtime.Ref, _ *agentapi.Client, w io.Writer) (runtime.ExportStats, error) {
	if err := ref.Check(); err != nil {
		return runtime.ExportStats{}, err
	}
	f, err := os.CreateTemp(ref.Dir, "upper-*.tar")
	if err != nil {
		return runtime.ExportStats{}, fmt.Errorf("exporting sandbox %s: %w", ref.ID, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := r.runsc(ctx, exportTimeout, ref.Dir, "tar", "rootfs-upper", "--file", f.Name(), ref.ID); err != nil {
		return runtime.ExportStats{}, fmt.Errorf("exporting sandbox %s: %w", ref.ID, err)
	}
	st, err := overlaytar.Convert(f, w, overlaytar.Options{Exclude: agentapi.RuntimeWrittenFiles})
	if err != nil {
		return runtime.ExportStats{}, fmt.Errorf("exporting sandbox %s: %w", ref.ID, err)
	}
	return runtime.ExportStats{Entries: st.Entries, Skipped: st.Skipped, SkippedCount: st.SkippedCount}, nil
}
