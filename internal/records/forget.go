package records

import (
	"context"
	"fmt"
)

// ForgetEnded deletes the record and events of sandbox id once it has
// ended (a sandbox moved to another node of a cluster, whose record
// lives on there); a live one is left alone.
func (s *Store) ForgetEnded(ctx context.Context, id string) error {
	defer s.timed("forget_ended")()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("forgetting sandbox %s: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ? AND state IN ('terminated', 'failed')`, id)
	if err != nil {
		return fmt.Errorf("forgetting sandbox %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE sandbox_id = ?`, id); err != nil {
		return fmt.Errorf("forgetting the events of %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("forgetting sandbox %s: %w", id, err)
	}
	return nil
}
