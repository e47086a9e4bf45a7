package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

func TestSandboxesSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Runtime: "gvisor", Image: "base", CPU: 1, MemoryMB: 512, MemoryLimitMB: 512, Timeout: time.Minute, Tags: map[string]string{"a": "b"}}
	live := &sandbox.Sandbox{ID: sandbox.NewID(), Spec: spec, State: sandbox.Running, CreatedAt: time.Now().UTC(), Dir: "/x"}
	code := 124
	dead := &sandbox.Sandbox{ID: sandbox.NewID(), Spec: spec, State: sandbox.Terminated, CreatedAt: time.Now().UTC(),
		EndedAt: time.Now().UTC(), ExitCode: &code, EndReason: sandbox.EndTimeout}
	for _, sb := range []*sandbox.Sandbox{live, dead} {
		if err := s.PutSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendEvent(ctx, Event{SandboxID: live.ID, Kind: "running", Message: "m", Fields: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.GetSandbox(ctx, dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExitCode == nil || *got.ExitCode != 124 || got.State != sandbox.Terminated || got.Spec.Tags["a"] != "b" || got.Spec.Timeout != time.Minute {
		t.Errorf("reopened record differs: %+v", got)
	}
	lives, err := s.ListSandboxes(ctx, true)
	if err != nil || len(lives) != 1 || lives[0].ID != live.ID {
		t.Errorf("live list: %v %+v", err, lives)
	}
	evs, err := s.Events(ctx, live.ID, 0, 10)
	if err != nil || len(evs) != 1 || evs[0].Fields["k"] != "v" {
		t.Errorf("events: %v %+v", err, evs)
	}
	if _, err := s.GetSandbox(ctx, "sb-missing"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing sandbox: %v, want not found", err)
	}
}

func TestProcesses(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutProcessStart(ctx, Process{SandboxID: "sb-1", PID: 7, Args: []string{"echo", "hi"}, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutProcessEnd(ctx, "sb-1", 7, 3, time.Now()); err != nil {
		t.Fatal(err)
	}
	ps, err := s.Processes(ctx, "sb-1")
	if err != nil || len(ps) != 1 || ps[0].ExitCode == nil || *ps[0].ExitCode != 3 || ps[0].Args[1] != "hi" {
		t.Fatalf("processes: %v %+v", err, ps)
	}
}

// A database written before a migration opens, gains the column, and
// keeps its rows.
func TestMigrateOldDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	// Make it look like a version-0 database: no port_token column.
	for _, q := range []string{
		`CREATE TABLE sandboxes_old AS SELECT id, name, state, spec, created_at, started_at, ended_at, exit_code, end_reason, error, agent_version, dir FROM sandboxes`,
		`DROP TABLE sandboxes`, `ALTER TABLE sandboxes_old RENAME TO sandboxes`,
		`INSERT INTO sandboxes VALUES ('sb-old', '', 'terminated', '{}', 1, 0, 0, NULL, '', '', '', '')`,
		`DROP TABLE snapshots`, `PRAGMA user_version = 0`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sb, err := s.GetSandbox(ctx, "sb-old")
	if err != nil || sb.PortToken != "" {
		t.Fatalf("old row after migration: %+v, %v", sb, err)
	}
}

// Snapshots are stored, found by id or name, listed and deleted; a name
// is unique.
func TestSnapshots(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sn := &sandbox.Snapshot{ID: sandbox.NewSnapshotID(), Name: "warm", SandboxID: sandbox.NewID(),
		Spec: sandbox.Spec{Runtime: "vm", Image: "base", MemoryMB: 256}, Runtime: "vm", RuntimeVersion: "qemu 7.2",
		AgentProtocol: 1, AgentVersion: "a", SizeBytes: 42, CreatedAt: time.Now().UTC(), Dir: "/x"}
	if err := s.PutSnapshot(ctx, sn); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{sn.ID, "warm"} {
		got, err := s.GetSnapshot(ctx, ref)
		if err != nil || got.ID != sn.ID || got.Spec.MemoryMB != 256 || got.RuntimeVersion != "qemu 7.2" {
			t.Fatalf("get %s: %+v %v", ref, got, err)
		}
	}
	dup := *sn
	dup.ID = sandbox.NewSnapshotID()
	if err := s.PutSnapshot(ctx, &dup); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate name: %v", err)
	}
	dup.Name = ""
	if err := s.PutSnapshot(ctx, &dup); err != nil {
		t.Fatal(err)
	}
	if list, err := s.ListSnapshots(ctx); err != nil || len(list) != 2 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	if err := s.DeleteSnapshot(ctx, sn.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSnapshot(ctx, sn.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}
