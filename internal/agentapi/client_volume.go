package agentapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"corral/internal/errdefs"
)

// A vm guest mounts each volume over NFSv3 from a listener its agent
// keeps on the guest's loopback, one per volume (Index); every connection
// the guest's NFS client makes there is relayed, as one HTTP/2 stream of
// this channel, to the daemon's NFS server of that volume. The sandbox's
// network never carries it.

// VolumeMountRequest is the body of POST /volume/mount.
type VolumeMountRequest struct {
	// Index names the volume's relay (0 to MaxVolumes-1).
	Index int `json:"index"`
	// Path is where the guest mounts it: absolute and clean.
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// MaxVolumes bounds the volumes one sandbox mounts over NFS.
const MaxVolumes = 16

// MountVolume asks the agent to mount volume req.Index at req.Path. The
// daemon must be accepting that volume's relay (AcceptVolumeNFS) first:
// the mount talks to its server.
func (c *Client) MountVolume(ctx context.Context, req VolumeMountRequest) error {
	if c.version < VolumeNFSSince {
		return fmt.Errorf("%w: agent %q predates volumes over NFS (protocol %d)", errdefs.ErrNotSupported, c.agentVersion, c.version)
	}
	return c.callJSON(ctx, http.MethodPost, c.prefix+PathVolumeMount, nil, req, nil)
}

// AcceptVolumeNFS waits until the guest's NFS client connects to volume
// index's listener and returns that connection, relayed. The daemon keeps
// one of these waiting per volume. Deadlines are not supported (see
// DialPort); cancel ctx or Close instead.
func (c *Client) AcceptVolumeNFS(ctx context.Context, index int) (net.Conn, error) {
	if c.version < VolumeNFSSince {
		return nil, fmt.Errorf("%w: agent %q predates volumes over NFS (protocol %d)", errdefs.ErrNotSupported, c.agentVersion, c.version)
	}
	conn, err := c.dialStream(ctx, PathVolumeRelay, url.Values{"index": {strconv.Itoa(index)}}, index)
	if err != nil {
		return nil, fmt.Errorf("agent volume relay %d: %w", index, err)
	}
	return conn, nil
}
