package manager

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/sandbox"
)

// Each quota refuses a snapshot with resource_exhausted naming it:
// snapshots kept per sandbox (those being saved count), the overall size,
// and the free disk beyond the margin; a released reservation frees its
// place.
func TestSnapshotQuotas(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(sandbox.Spec{})
	h := e.m.lookup(sb.ID)
	kept := &sandbox.Snapshot{ID: ids.NewSnapshot(), SandboxID: sb.ID, Spec: sb.Spec, Runtime: "gvisor",
		Dir: t.TempDir(), CreatedAt: time.Now().UTC(), SizeBytes: 3 << 20}
	if err := e.store.PutSnapshot(ctx, kept); err != nil {
		t.Fatal(err)
	}
	refused := func(words ...string) {
		t.Helper()
		_, err := e.m.reserveSnapshot(ctx, h)
		if !errors.Is(err, errdefs.ErrResourceExhausted) {
			t.Fatalf("reserve: %v, want resource_exhausted", err)
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("refusal %q does not say %q", err, w)
			}
		}
	}

	e.m.cfg.SnapshotQuota = SnapshotQuota{PerSandbox: 2}.withDefaults()
	release, err := e.m.reserveSnapshot(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	refused("quota per sandbox is 2", "has 2 memory snapshots")
	release()
	if release, err = e.m.reserveSnapshot(ctx, h); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	release()

	// The in-process runtime reports no memory: the estimate is the
	// sandbox's limit (512 MiB) and its directory.
	e.m.cfg.SnapshotQuota = SnapshotQuota{TotalMB: 500}.withDefaults()
	refused("overall quota of 500 MiB", "3 MiB of", "MiB asked")

	e.m.cfg.SnapshotQuota = SnapshotQuota{MinFreeMB: 1 << 40}.withDefaults()
	refused("snapshot disk", "MiB asked", "kept free")
}
