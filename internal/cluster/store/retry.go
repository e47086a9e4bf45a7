package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// deadlockDetected is PostgreSQL's SQLSTATE for a transaction it aborted
// to break a deadlock. Statements here lock a placement and its node in
// either order (an end: the placement, then the node's counters; a
// heartbeat or a node's loss: the node, then its placements), so two of
// them can meet; the one aborted is run again.
const deadlockDetected = "40P01"

// retry runs fn again, a few times, while PostgreSQL aborts it to break a
// deadlock.
func retry(ctx context.Context, fn func() error) error {
	var err error
	for range 5 {
		if err = fn(); err == nil || ctx.Err() != nil {
			return err
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != deadlockDetected {
			return err
		}
	}
	return err
}
