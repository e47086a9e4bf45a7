package gvisor

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/boundfs"
)

// A sandbox's agent must come back after many memory snapshots: runsc's
// gofer keeps the host socket of each listener the agent closes for a
// checkpoint (one descriptor, one inode of the channel's tmpfs each), so
// the channel's inode bound must hold far more than a sandbox's snapshots
// and forks; with 8 inodes the seventh snapshot left the agent no room to
// listen again.
func TestManySnapshotsKeepTheAgent(t *testing.T) {
	r := newRuntime(t)
	agent := realAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref := startWith(t, r, agent)
	n := 12
	if n >= boundfs.Channel.Inodes {
		t.Fatalf("the channel holds %d inodes: the test would not exercise the bound", boundfs.Channel.Inodes)
	}
	for i := range n {
		c := connect(t, r, ref)
		if err := c.EndSession(ctx); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if err := r.SaveSnapshot(ctx, ref, filepath.Join(t.TempDir(), "snap-"+strconv.Itoa(i))); err != nil {
			t.Fatalf("snapshot %d: %v", i+1, err)
		}
	}
	c := connect(t, r, ref)
	defer c.Close()
	if _, err := c.WriteFile(ctx, "/root/alive", strings.NewReader("alive\n"), 0o600, ""); err != nil {
		t.Fatalf("after %d snapshots: %v", n, err)
	}
}
