package records

import (
	"context"
	"fmt"
	"time"
)

// PruneEnded deletes the records of at most limit sandboxes that ended
// (terminated or failed) before before, with their events, in one
// transaction, and returns their ids, oldest first. A sandbox that has not
// ended is never touched, however old. A record without an end time (an
// older daemon's) counts from its creation.
func (s *Store) PruneEnded(ctx context.Context, before time.Time, limit int) ([]string, error) {
	defer s.timed("prune_ended")()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("pruning ended sandboxes: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id FROM sandboxes
		WHERE state IN ('terminated', 'failed') AND (CASE WHEN ended_at > 0 THEN ended_at ELSE created_at END) < ?
		ORDER BY ended_at LIMIT ?`, before.UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("pruning ended sandboxes: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pruning ended sandboxes: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pruning ended sandboxes: %w", err)
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE sandbox_id = ?`, id); err != nil {
			return nil, fmt.Errorf("pruning the events of %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ? AND state IN ('terminated', 'failed')`, id); err != nil {
			return nil, fmt.Errorf("pruning the record of %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("pruning ended sandboxes: %w", err)
	}
	return ids, nil
}

// PruneOrphanEvents deletes the events older than before of sandboxes that
// have no record (a record an earlier prune or a failed create never
// wrote), and returns how many.
func (s *Store) PruneOrphanEvents(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM events WHERE time < ?
		AND NOT EXISTS (SELECT 1 FROM sandboxes WHERE sandboxes.id = events.sandbox_id)`, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("pruning events without a sandbox: %w", err)
	}
	return res.RowsAffected()
}

// HasSandbox reports whether a record of id exists.
func (s *Store) HasSandbox(ctx context.Context, id string) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE id = ?`, id).Scan(&n); err != nil {
		return false, fmt.Errorf("looking up sandbox %s: %w", id, err)
	}
	return n > 0, nil
}
