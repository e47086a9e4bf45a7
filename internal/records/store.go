// Package records keeps Corral's durable records (sandboxes, events,
// memory snapshots) in an embedded SQLite database (pure Go,
// modernc.org/sqlite).
//
// Every write is committed with synchronous=FULL before it returns, so what
// the daemon acknowledged survives a crash or kill -9. Writes are few and
// off the hot paths: a sandbox's record changes with its state, never per
// exec or file call. The package imports the sandbox model and nothing else
// from Corral's daemon.
package records

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"corral/internal/errdefs"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Store is the metadata database.
type Store struct {
	db *sql.DB
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

// Open opens (creating if needed) the database at path.
func Open(ctx context.Context, path string) (*Store, error) {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)", "foreign_keys(1)"} {
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
	return &Store{db: db}, nil
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
