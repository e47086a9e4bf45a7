package records

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations upgrade a database created by an older daemon, in order;
// PRAGMA user_version counts those applied. Append, never edit.
var migrations = []string{
	// 1: exposed ports' access token.
	`ALTER TABLE sandboxes ADD COLUMN port_token TEXT NOT NULL DEFAULT ''`,
	// 2: what the runtime says about the sandbox's machine (JSON object).
	`ALTER TABLE sandboxes ADD COLUMN runtime_info TEXT NOT NULL DEFAULT '{}'`,
	// 3, 4: pauses (paused time does not count against the timeout).
	`ALTER TABLE sandboxes ADD COLUMN paused_at INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE sandboxes ADD COLUMN paused_for INTEGER NOT NULL DEFAULT 0`,
	// 5: memory snapshots.
	`CREATE TABLE snapshots (
		id              TEXT PRIMARY KEY,
		name            TEXT UNIQUE,
		sandbox_id      TEXT NOT NULL,
		spec            TEXT NOT NULL,
		runtime         TEXT NOT NULL,
		runtime_version TEXT NOT NULL,
		agent_protocol  INTEGER NOT NULL,
		agent_version   TEXT NOT NULL,
		size_bytes      INTEGER NOT NULL DEFAULT 0,
		created_at      INTEGER NOT NULL,
		dir             TEXT NOT NULL
	)`,
	// 6: per-process records are gone: exec no longer writes to disk.
	`DROP TABLE IF EXISTS processes`,
	// 7, 8: env values sealed apart from the spec (envseal.go; Open moves
	// an older row's env there).
	`ALTER TABLE sandboxes ADD COLUMN env_sealed TEXT NOT NULL DEFAULT ''`,
	`ALTER TABLE snapshots ADD COLUMN env_sealed TEXT NOT NULL DEFAULT ''`,
	// 9: port tokens are derived, never stored (manager/ports.go).
	`UPDATE sandboxes SET port_token = ''`,
	// 10: a lifetime changed while the sandbox lives (sandbox.Lifetime).
	`ALTER TABLE sandboxes ADD COLUMN lifetime INTEGER NOT NULL DEFAULT 0`,
	// 11: named secrets, their values sealed with a subkey (secrets.go).
	`CREATE TABLE IF NOT EXISTS secrets (
		name       TEXT PRIMARY KEY,
		keys       TEXT NOT NULL,
		sealed     TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	)`,
	// 12, 13: the audit trail (package audit), a hash chain ordered by seq.
	`CREATE TABLE IF NOT EXISTS audit (
		seq        INTEGER PRIMARY KEY,
		time       INTEGER NOT NULL,
		kind       TEXT NOT NULL,
		sandbox_id TEXT NOT NULL DEFAULT '',
		caller     TEXT NOT NULL DEFAULT '',
		fields     TEXT NOT NULL DEFAULT '{}',
		prev_hash  TEXT NOT NULL,
		hash       TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS audit_sandbox ON audit(sandbox_id, seq)`,
	// 14: what each ended sandbox used (usage.go); kept apart from the
	// sandbox's record, and pruned by its own retention.
	`CREATE TABLE IF NOT EXISTS usage (
		sandbox_id TEXT PRIMARY KEY,
		runtime    TEXT NOT NULL,
		tags       TEXT NOT NULL DEFAULT '{}',
		started_at INTEGER NOT NULL,
		ended_at   INTEGER NOT NULL,
		totals     TEXT NOT NULL
	);
	CREATE INDEX IF NOT EXISTS usage_ended ON usage(ended_at)`,
	// 15: filesystem-only pauses: how a paused sandbox is paused, and the
	// image its root filesystem was saved to.
	`ALTER TABLE sandboxes ADD COLUMN pause_kind TEXT NOT NULL DEFAULT '';
	ALTER TABLE sandboxes ADD COLUMN fs_image TEXT NOT NULL DEFAULT ''`,
}

func migrate(ctx context.Context, db *sql.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	for ; v < len(migrations); v++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}
