package overlaytar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// DropStaleWhiteouts copies the OCI layer tar r to w without the whiteouts
// of paths that exists reports absent from the layers below. A runtime
// records the deletion of a file the sandbox itself created (dpkg's
// *.dpkg-new, say) as a whiteout too; such a whiteout hides nothing, but
// overlayfs lists it in a directory that exists in one layer only, where
// it then shows as an entry that cannot be stat'ed (and breaks tools that
// walk the tree, mkfs.ext4 -d among them). It returns how many it dropped.
func DropStaleWhiteouts(r io.Reader, w io.Writer, exists func(name string) bool) (int, error) {
	tr, tw := tar.NewReader(r), tar.NewWriter(w)
	dropped := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return dropped, fmt.Errorf("reading layer tar: %w", err)
		}
		dir, base := path.Split(hdr.Name)
		if target, ok := strings.CutPrefix(base, whiteoutPrefix); ok && base != opaqueMarker && !exists(path.Join(dir, target)) {
			dropped++
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return dropped, fmt.Errorf("writing layer entry %q: %w", hdr.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return dropped, fmt.Errorf("copying layer entry %q: %w", hdr.Name, err)
		}
	}
	return dropped, tw.Close()
}
