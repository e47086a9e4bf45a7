package agentapi

import (
	"context"
	"errors"
	"testing"

	"corral/internal/errdefs"
)

// An agent older than VolumeNFSSince is never asked to mount or relay a
// volume (it would answer 404, read as not found).
func TestVolumeNFSRefusedToOlderAgents(t *testing.T) {
	conn, _ := fakeAgent(t, agentMux([]int{1, 2, 3, 4}, nil))
	c, err := NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.MountVolume(context.Background(), VolumeMountRequest{Path: "/data"}); !errors.Is(err, errdefs.ErrNotSupported) {
		t.Errorf("MountVolume on protocol 4: %v, want not supported", err)
	}
	if _, err := c.AcceptVolumeNFS(context.Background(), 0); !errors.Is(err, errdefs.ErrNotSupported) {
		t.Errorf("AcceptVolumeNFS on protocol 4: %v, want not supported", err)
	}
}
