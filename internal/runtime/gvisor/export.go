package gvisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/image/overlaytar"
	"corral/internal/runtime"
)

// exportTimeout bounds runsc's serialisation of the writable layer (it
// writes from memory and the layer's file store, at disk speed).
const exportTimeout = 10 * time.Minute

// unsizedExportBytes bounds the export of a sandbox whose writable layer
// has no recorded size (started before disk sizes were recorded): the
// image store's own bound on a layer.
const unsizedExportBytes = 16 << 30

// exportExcludes are the files the agent writes at start and the mount
// point of tmpKeeper (made in the writable layer by runsc): the sandbox's,
// not its image's.
var exportExcludes = append(append([]string(nil), agentapi.RuntimeWrittenFiles...), tmpKeeper.Destination)

// ExportChanges writes the sandbox's writable layer, everything it changed
// relative to its image, as an OCI layer tar. runsc serialises the
// sandbox's overlay upper layer (overlayfs format) into a pipe, never a
// host file: overlaytar turns it into OCI whiteouts as it comes, leaving
// out the files the agent writes at start, and refuses a layer whose files
// hold more than the sandbox's disk (a sparse file inside, which runsc
// would write out as zeros, bounded by nothing). The sandbox keeps
// running; what its processes write while the export runs may or may not
// be included.
func (r *Runtime) ExportChanges(ctx context.Context, ref runtime.Ref, _ *agentapi.Client, w io.Writer) (runtime.ExportStats, error) {
	if err := ref.Check(); err != nil {
		return runtime.ExportStats{}, err
	}
	st, err := r.export(ctx, ref, w)
	if err != nil {
		return runtime.ExportStats{}, fmt.Errorf("exporting sandbox %s: %w", ref.ID, err)
	}
	return runtime.ExportStats{Entries: st.Entries, Skipped: st.Skipped, SkippedCount: st.SkippedCount}, nil
}

func (r *Runtime) export(ctx context.Context, ref runtime.Ref, w io.Writer) (overlaytar.Stats, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return overlaytar.Stats{}, err
	}
	defer pr.Close()
	ctx, cancel := context.WithTimeout(ctx, exportTimeout)
	defer cancel()
	// runsc opens --file itself and hands it to the sandbox, which writes
	// the tar into it: the pipe's write end, descriptor 3.
	cmd := r.command(ctx, ref.Dir, "tar", "rootfs-upper", "--file", "/proc/self/fd/3", ref.ID)
	cmd.ExtraFiles = []*os.File{pw}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		pw.Close()
		return overlaytar.Stats{}, fmt.Errorf("runsc tar: %w", err)
	}
	pw.Close()
	st, convErr := overlaytar.Convert(pr, w, overlaytar.Options{Exclude: exportExcludes, MaxBytes: diskBytes(ref.Dir)})
	// A refused or failed conversion stops reading: runsc's writes fail
	// and it exits.
	pr.Close()
	runErr := cmd.Wait()
	switch {
	case convErr != nil && (errors.Is(convErr, errdefs.ErrResourceExhausted) || runErr == nil):
		return st, convErr
	case runErr != nil:
		return st, runscError(ctx, []string{"tar"}, stderr.Bytes(), runErr)
	}
	return st, nil
}

// diskBytes is the size of the sandbox's writable layer, from the
// --overlay2 recorded at Start ("...,size=<MiB>M").
func diskBytes(dir string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, overlayFile))
	if err != nil {
		return unsizedExportBytes
	}
	for _, opt := range strings.Split(string(b), ",") {
		if v, ok := strings.CutPrefix(opt, "size="); ok {
			if mb, err := strconv.ParseInt(strings.TrimSuffix(v, "M"), 10, 64); err == nil && mb > 0 {
				return mb << 20
			}
		}
	}
	return unsizedExportBytes
}
