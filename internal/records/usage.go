package records

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"corral/internal/usage"
)

// PutUsage records what an ended sandbox used, replacing an earlier
// record of it (a settle that ran twice).
func (s *Store) PutUsage(ctx context.Context, r usage.Record) error {
	tags, err := json.Marshal(r.Tags)
	if err != nil {
		return fmt.Errorf("recording the usage of %s: %w", r.SandboxID, err)
	}
	totals, err := json.Marshal(r.Totals)
	if err != nil {
		return fmt.Errorf("recording the usage of %s: %w", r.SandboxID, err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT OR REPLACE INTO usage (sandbox_id, runtime, tags, started_at, ended_at, totals)
		VALUES (?, ?, ?, ?, ?, ?)`, r.SandboxID, r.Runtime, string(tags), unixNano(r.StartedAt), unixNano(r.EndedAt), string(totals))
	if err != nil {
		return fmt.Errorf("recording the usage of %s: %w", r.SandboxID, err)
	}
	return nil
}

// GetUsage returns the usage recorded for sandbox id; ErrNotFound when
// there is none (it has not ended, metering was off, or it was pruned).
func (s *Store) GetUsage(ctx context.Context, id string) (usage.Record, error) {
	row := s.db.QueryRowContext(ctx, `SELECT sandbox_id, runtime, tags, started_at, ended_at, totals FROM usage WHERE sandbox_id = ?`, id)
	r, err := scanUsage(row)
	if err != nil {
		return r, notFound(err, "usage of sandbox "+id)
	}
	return r, nil
}

// ListUsage returns the usage of the sandboxes that ran at some time in
// [from, to) (a zero to: until now), oldest end first, at most limit.
func (s *Store) ListUsage(ctx context.Context, from, to time.Time, limit int) ([]usage.Record, error) {
	toN := int64(1<<63 - 1)
	if !to.IsZero() {
		toN = to.UnixNano()
	}
	rows, err := s.db.QueryContext(ctx, `SELECT sandbox_id, runtime, tags, started_at, ended_at, totals FROM usage
		WHERE ended_at >= ? AND started_at < ? ORDER BY ended_at, sandbox_id LIMIT ?`, unixNano(from), toN, limit)
	if err != nil {
		return nil, fmt.Errorf("listing usage: %w", err)
	}
	defer rows.Close()
	var out []usage.Record
	for rows.Next() {
		r, err := scanUsage(rows)
		if err != nil {
			return nil, fmt.Errorf("listing usage: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// PruneUsage deletes the usage of sandboxes that ended before before and
// returns how many.
func (s *Store) PruneUsage(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM usage WHERE ended_at < ?`, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("pruning usage: %w", err)
	}
	return res.RowsAffected()
}

func scanUsage(sc scanner) (usage.Record, error) {
	var r usage.Record
	var tags, totals string
	var started, ended int64
	if err := sc.Scan(&r.SandboxID, &r.Runtime, &tags, &started, &ended, &totals); err != nil {
		return r, err
	}
	r.StartedAt, r.EndedAt = fromNano(started), fromNano(ended)
	if err := json.Unmarshal([]byte(tags), &r.Tags); err != nil {
		return r, fmt.Errorf("usage of %s: tags: %w", r.SandboxID, err)
	}
	if err := json.Unmarshal([]byte(totals), &r.Totals); err != nil {
		return r, fmt.Errorf("usage of %s: totals: %w", r.SandboxID, err)
	}
	return r, nil
}
