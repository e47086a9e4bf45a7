package agent

import (
	"fmt"
	"net/http"

	"corral/internal/errdefs"
	"corral/internal/image/dirtar"
)

// exportUpper is GET /v1/fs/export-upper: a tar of the root overlay's upper
// directory, everything the sandbox changed, in overlayfs form (whiteouts
// as 0/0 character devices, opaque directories marked with
// trusted.overlay.opaque). The host turns it into an OCI layer. A failure
// once the tar has begun resets the stream, so a cut export is an error on
// the host, never a short layer.
func (s *Server) exportUpper(w http.ResponseWriter, r *http.Request) error {
	if s.upper == "" {
		return fmt.Errorf("%w: this sandbox's agent cannot see its writable layer", errdefs.ErrNotSupported)
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	st, err := dirtar.Write(w, s.upper, "/", dirtar.Options{Overlay: true})
	if err != nil {
		s.log.Warn("export of the writable layer failed", "op", "export_upper", "err", err)
		panic(http.ErrAbortHandler)
	}
	s.log.Debug("writable layer exported", "op", "export_upper", "entries", st.Entries, "bytes", st.Bytes, "skipped", st.SkippedCount)
	return nil
}
