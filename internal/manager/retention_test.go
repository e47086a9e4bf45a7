package manager

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/sandbox"
	"corral/internal/testwait"
)

// TestRetentionPrunesEndedSandboxes: once the retention has passed since a
// sandbox ended, its record, events and entrypoint log go; a running
// sandbox keeps all three however old, and a log without a record goes
// once it is as old.
func TestRetentionPrunesEndedSandboxes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ended := e.create(sandbox.Spec{Entrypoint: []string{"sh", "-c", "echo out; sleep 60"}})
	live := e.create(sandbox.Spec{Entrypoint: []string{"sh", "-c", "echo out; sleep 60"}})
	waitForLog(t, e.m.cfg.logPath(ended.ID))
	waitForLog(t, e.m.cfg.logPath(live.ID))
	if _, err := e.m.Terminate(ctx, ended.ID, sandbox.EndTerminated, nil); err != nil {
		t.Fatal(err)
	}
	orphan := e.m.cfg.logPath(ids.NewSandbox())
	if err := os.WriteFile(orphan, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	// A cutoff before the end keeps everything.
	if n, err := e.m.pruneEnded(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruneEnded an hour back: %d, %v; want nothing", n, err)
	}
	if _, err := e.m.Get(ctx, ended.ID); err != nil {
		t.Fatalf("the ended sandbox went before its time: %v", err)
	}

	n, err := e.m.pruneEnded(ctx, time.Now().Add(time.Second))
	if err != nil || n != 1 {
		t.Fatalf("pruneEnded: %d, %v; want the ended sandbox", n, err)
	}
	if _, err := e.m.Get(ctx, ended.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the ended sandbox's record: %v, want not found", err)
	}
	if evs, err := e.store.Events(ctx, ended.ID, 0, 100); err != nil || len(evs) != 0 {
		t.Errorf("the ended sandbox's events: %v, %v", evs, err)
	}
	for _, p := range []string{e.m.cfg.logPath(ended.ID), orphan} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: still there (%v)", p, err)
		}
	}
	if sb, err := e.m.Get(ctx, live.ID); err != nil || sb.State != sandbox.Running {
		t.Errorf("the live sandbox: %+v, %v", sb, err)
	}
	if evs, err := e.store.Events(ctx, live.ID, 0, 100); err != nil || len(evs) == 0 {
		t.Errorf("the live sandbox's events: %v, %v", evs, err)
	}
	if _, err := os.Stat(e.m.cfg.logPath(live.ID)); err != nil {
		t.Errorf("the live sandbox's log: %v", err)
	}
}

// TestRetentionRunsInTheBackground: a manager with a retention prunes by
// itself.
func TestRetentionRunsInTheBackground(t *testing.T) {
	e := newEnvWith(t, func(c *Config) { c.Retention = Retention{Keep: 200 * time.Millisecond, Every: 50 * time.Millisecond} })
	ctx := context.Background()
	sb := e.create(sandbox.Spec{})
	if _, err := e.m.Terminate(ctx, sb.ID, sandbox.EndTerminated, nil); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the ended sandbox's record to be pruned", func() bool {
		_, err := e.m.Get(ctx, sb.ID)
		return errors.Is(err, errdefs.ErrNotFound)
	})
}

func waitForLog(t *testing.T, p string) {
	t.Helper()
	testwait.For(t, 10*time.Second, "a log at "+p, func() bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Size() > 0
	})
}
