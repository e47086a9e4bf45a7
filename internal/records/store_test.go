package records

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/sandbox"
)

func TestSandboxesSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path, testKey)
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Runtime: "gvisor", Image: "base", CPU: 1, MemoryMB: 512, MemoryLimitMB: 512, Timeout: time.Minute, Tags: map[string]string{"a": "b"}}
	live := &sandbox.Sandbox{ID: ids.NewSandbox(), Spec: spec, State: sandbox.Running, CreatedAt: time.Now().UTC(), Dir: "/x"}
	code := 124
	dead := &sandbox.Sandbox{ID: ids.NewSandbox(), Spec: spec, State: sandbox.Terminated, CreatedAt: time.Now().UTC(),
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

	s, err = Open(ctx, path, testKey)
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

// A database from before exec stopped writing per-process rows loses the
// processes table and keeps everything else.
func TestProcessesTableDropped(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v5.db")
	s, err := Open(ctx, path, testKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE processes (sandbox_id TEXT NOT NULL, pid INTEGER NOT NULL, args TEXT NOT NULL, started_at INTEGER NOT NULL)`,
		`INSERT INTO processes VALUES ('sb-old', 7, '[]', 1)`,
		`INSERT INTO sandboxes (id, state, spec, created_at) VALUES ('sb-kept', 'terminated', '{}', 1)`,
		`ALTER TABLE sandboxes DROP COLUMN env_sealed`, `ALTER TABLE snapshots DROP COLUMN env_sealed`, // added by 7 and 8
		`ALTER TABLE sandboxes DROP COLUMN pause_kind`, `ALTER TABLE sandboxes DROP COLUMN fs_image`, // added by 15
		`ALTER TABLE sandboxes DROP COLUMN lifetime`, // a version 5 database had none
		`PRAGMA user_version = 5`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	s.Close()
	if s, err = Open(ctx, path, testKey); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'processes'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("processes table after migration: %d, %v", n, err)
	}
	if _, err := s.GetSandbox(ctx, "sb-kept"); err != nil {
		t.Fatalf("a sandbox row after migration: %v", err)
	}
}

// A database written before a migration opens, gains the column, and
// keeps its rows.
func TestMigrateOldDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := Open(ctx, path, testKey)
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
	s, err = Open(ctx, path, testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sb, err := s.GetSandbox(ctx, "sb-old")
	if err != nil || sb.State != sandbox.Terminated {
		t.Fatalf("old row after migration: %+v, %v", sb, err)
	}
}

// Snapshots are stored, found by id or name, listed and deleted; a name
// is unique.
func TestSnapshots(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"), testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sn := &sandbox.Snapshot{ID: ids.NewSnapshot(), Name: "warm", SandboxID: ids.NewSandbox(),
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
	dup.ID = ids.NewSnapshot()
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

// A record and the events of its change are one write: both land.
func TestPutSandboxWithEvents(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "e.db"), testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sb := &sandbox.Sandbox{ID: ids.NewSandbox(), State: sandbox.Running, CreatedAt: time.Now().UTC(), Dir: "/x"}
	if err := s.PutSandbox(ctx, sb, Event{Kind: "running", Message: "up", Fields: map[string]string{"k": "v"}}, Event{Kind: "second"}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, sb.ID, 0, 10)
	if err != nil || len(evs) != 2 || evs[0].Kind != "running" || evs[0].Fields["k"] != "v" || evs[1].Kind != "second" {
		t.Fatalf("events: %+v %v", evs, err)
	}
	if got, err := s.GetSandbox(ctx, sb.ID); err != nil || got.State != sandbox.Running {
		t.Fatalf("record: %+v %v", got, err)
	}
}
