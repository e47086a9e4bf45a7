package records

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// Event is one entry of a sandbox's append-only event log.
type Event struct {
	Seq       int64
	SandboxID string
	Time      time.Time
	Kind      string
	Message   string
	Fields    map[string]string
}

// AppendEvent appends ev (Seq and, if zero, Time are filled in).
func (s *Store) AppendEvent(ctx context.Context, ev Event) error {
	defer s.timed("append_event")()
	return appendEvent(ctx, s.db, ev)
}

// execer is what appendEvent writes through: the database or a
// transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func appendEvent(ctx context.Context, db execer, ev Event) error {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	fields, err := json.Marshal(ev.Fields)
	if err != nil {
		return fmt.Errorf("encoding event fields: %w", err)
	}
	_, err = db.ExecContext(ctx, `INSERT INTO events (sandbox_id, time, kind, message, fields) VALUES (?, ?, ?, ?, ?)`,
		ev.SandboxID, ev.Time.UnixNano(), ev.Kind, ev.Message, string(fields))
	if err != nil {
		return fmt.Errorf("appending event to %s: %w", ev.SandboxID, err)
	}
	return nil
}

// Events returns the events of a sandbox after seq, oldest first, at most limit.
func (s *Store) Events(ctx context.Context, sandboxID string, after int64, limit int) ([]Event, error) {
	defer s.timed("events")()
	rows, err := s.db.QueryContext(ctx, `SELECT seq, time, kind, message, fields FROM events
		WHERE sandbox_id = ? AND seq > ? ORDER BY seq LIMIT ?`, sandboxID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("reading events of %s: %w", sandboxID, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		ev := Event{SandboxID: sandboxID}
		var t int64
		var fields string
		if err := rows.Scan(&ev.Seq, &t, &ev.Kind, &ev.Message, &fields); err != nil {
			return nil, err
		}
		ev.Time = time.Unix(0, t).UTC()
		if err := json.Unmarshal([]byte(fields), &ev.Fields); err != nil {
			return nil, fmt.Errorf("decoding event %d: %w", ev.Seq, err)
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}
