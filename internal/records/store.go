// Package records keeps Corral's durable records (sandboxes, events,
// memory snapshots) in an embedded SQLite database (pure Go,
// modernc.org/sqlite).
//
// Every write is committed with synchronous=FULL before it returns, so what
// the daemon acknowledged survives a crash or kill -9. Writes are few and
// off the hot paths: a sandbox's record changes with its state, never per
// exec or file call (the audit trail's rows, which are per call, are
// written in batches by package audit's own goroutine, behind the calls).
//
// Nothing in the database is for other local users: the file and its
// -wal and -shm are 0600, a spec's env is sealed with the daemon's key
// (package seal) and never stored in the clear, and deleted content is
// overwritten (secure_delete). The package imports the sandbox model, the
// seal package and the usage model, and nothing else from Corral's daemon.
package records

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"corral/internal/errdefs"
	"corral/internal/seal"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Store is the metadata database.
type Store struct {
	db  *sql.DB
	key *seal.Key
	// observe, when set, gets each operation's latency (observe.go).
	observe atomic.Pointer[observer]
}

const schema = `
CREATE TABLE IF NOT EXISTS sandboxes (
	id            TEXT PRIMARY KEY,
	name          TEXT NOT NULL DEFAULT '',
	state         TEXT NOT NULL,
	spec          TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	started_at    INTEGER NOT NULL DEFAULT 0,
	ended_at      INTEGER NOT NULL DEFAULT 0,
	exit_code     INTEGER,
	end_reason    TEXT NOT NULL DEFAULT '',
	error         TEXT NOT NULL DEFAULT '',
	agent_version TEXT NOT NULL DEFAULT '',
	dir           TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS sandboxes_state ON sandboxes(state);
CREATE INDEX IF NOT EXISTS sandboxes_name ON sandboxes(name, created_at);
CREATE INDEX IF NOT EXISTS sandboxes_order ON sandboxes(created_at, id);
CREATE TABLE IF NOT EXISTS events (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	sandbox_id TEXT NOT NULL,
	time       INTEGER NOT NULL,
	kind       TEXT NOT NULL,
	message    TEXT NOT NULL,
	fields     TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_sandbox ON events(sandbox_id, seq);
`

// Open opens (creating if needed) the database at path, whose env values
// key seals. Rows an older daemon wrote with the env in the clear are
// sealed now.
func Open(ctx context.Context, path string, key *seal.Key) (*Store, error) {
	if key == nil {
		return nil, errors.New("opening the store: no seal key")
	}
	if err := private(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)", "foreign_keys(1)", "secure_delete(1)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	// One connection serialises writers; SQLite would anyway.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("creating schema in %s: %w", path, err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrating %s: %w", path, err)
	}
	s := &Store{db: db, key: key}
	if _, err := s.sealLegacyEnv(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrating %s: %w", path, err)
	}
	// Whatever an older daemon left in the log (an env in the clear) goes
	// with it: the log is copied into the database and emptied.
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("checkpointing %s: %w", path, err)
	}
	return s, nil
}

// private creates the database file 0600 if it is missing and tightens
// it and its -wal and -shm files otherwise (SQLite gives the latter the
// database's mode).
func private(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("opening store %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("opening store %s: %w", path, err)
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s", errdefs.ErrNotFound, what)
	}
	return err
}
