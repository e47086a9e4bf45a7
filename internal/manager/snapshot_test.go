package manager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/sandbox"
)

// A copy takes the snapshot's image, runtime and resources (asking for
// others names the field) and inherits what the caller leaves unset.
func TestFromSnapshot(t *testing.T) {
	rec := &sandbox.Snapshot{ID: "snap-aaaaaaaaaaaaaaaa", Spec: sandbox.Spec{
		Runtime: "vm", Image: "app:1", ImageDigest: "sha256:" + strings.Repeat("1", 64), CPU: 2, MemoryMB: 1024,
		MemoryLimitMB: 1024, DiskMB: 2048, Timeout: time.Hour, Env: map[string]string{"A": "1"}, Workdir: "/srv",
	}}
	for field, spec := range map[string]sandbox.Spec{
		"runtime":    {Runtime: "gvisor"},
		"image":      {Image: "other:2"},
		"memory_mb":  {MemoryMB: 512},
		"cpu":        {CPU: 1},
		"disk_mb":    {DiskMB: 1},
		"entrypoint": {Entrypoint: []string{"sleep", "1"}},
	} {
		err := fromSnapshot(&spec, rec)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	spec := sandbox.Spec{Runtime: "vm", Image: "app:1", Name: "copy", Timeout: time.Minute}
	if err := fromSnapshot(&spec, rec); err != nil {
		t.Fatal(err)
	}
	if spec.Image != rec.Spec.ImageDigest || spec.MemoryMB != 1024 || spec.CPU != 2 || spec.DiskMB != 2048 ||
		spec.Timeout != time.Minute || spec.Env["A"] != "1" || spec.Workdir != "/srv" || spec.Name != "copy" ||
		spec.FromSnapshot != rec.ID {
		t.Errorf("filled in: %+v", spec)
	}
	if err := spec.Normalize(); err != nil {
		t.Errorf("the filled-in spec does not normalize: %v", err)
	}
}

// The daemon's own snapshot names (warm pool templates, forks) are not
// for callers: a restarted daemon removes such snapshots.
func TestTakeRefusesReservedNames(t *testing.T) {
	e := newEnv(t)
	sb := e.create(sandbox.Spec{})
	for _, name := range []string{"corral.fork-1", "corral.pool-gvisor-x", "corral.mine"} {
		_, err := e.m.Snapshots().Take(context.Background(), sb.ID, name)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "name") {
			t.Errorf("a snapshot named %s: %v", name, err)
		}
	}
}

// A daemon that stopped in the middle of a fork leaves the fork's
// snapshot and the copies it started; the next start ends the copies (the
// fork never answered, and it is all or nothing) and removes the
// snapshot, and leaves other sandboxes and snapshots alone.
func TestReconcileEndsUnfinishedFork(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	parent := e.create(sandbox.Spec{})
	copied := e.create(sandbox.Spec{})
	other := e.create(sandbox.Spec{})
	e.m.Close()
	snap := func(name string) *sandbox.Snapshot {
		rec := &sandbox.Snapshot{ID: ids.NewSnapshot(), Name: name, SandboxID: parent.ID, Spec: parent.Spec,
			Runtime: "gvisor", CreatedAt: time.Now().UTC()}
		rec.Dir = filepath.Join(e.dir, "snapshots", rec.ID)
		if err := os.MkdirAll(rec.Dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := e.store.PutSnapshot(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	fork, kept := snap(forkPrefix+"0123abcd"), snap("mine")
	for id, from := range map[string]string{copied.ID: fork.ID, other.ID: kept.ID} {
		rec, err := e.store.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		rec.Spec.FromSnapshot = from
		if err := e.store.PutSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}

	e.m = e.open()
	if rec, err := e.m.Get(ctx, copied.ID); err != nil || rec.State != sandbox.Terminated || rec.EndReason != sandbox.EndLost {
		t.Errorf("the unfinished fork's copy: %+v %v", rec, err)
	}
	for _, id := range []string{parent.ID, other.ID} {
		if rec, err := e.m.Get(ctx, id); err != nil || rec.State != sandbox.Running {
			t.Errorf("%s after the restart: %+v %v", id, rec, err)
		}
	}
	if _, err := e.m.Snapshots().Get(ctx, fork.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the unfinished fork's snapshot: %v", err)
	}
	if _, err := os.Stat(fork.Dir); !os.IsNotExist(err) {
		t.Errorf("the unfinished fork's snapshot files: %v", err)
	}
	if _, err := e.m.Snapshots().Get(ctx, kept.ID); err != nil {
		t.Errorf("another snapshot: %v", err)
	}
}
