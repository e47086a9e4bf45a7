package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// leaderLock is the advisory lock the leader holds for leader-only jobs
// (node loss, stale reservations).
const leaderLock = 0x636f7272616c02 // "corral" 2

// Leadership is the leader lock, held on one connection of the pool for
// as long as the connection lives: a leader that dies (its connection
// closed) frees it for another.
type Leadership struct {
	conn *pgxpool.Conn
}

// Lead tries to become the leader; nil, nil when another instance is.
func (s *Store) Lead(ctx context.Context) (*Leadership, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	var ok bool
	if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(leaderLock)).Scan(&ok); err != nil {
		c.Release()
		return nil, fmt.Errorf("leader election: %w", err)
	}
	if !ok {
		c.Release()
		return nil, nil
	}
	return &Leadership{conn: c}, nil
}

// Check says whether the lock is still held (its connection alive).
func (l *Leadership) Check(ctx context.Context) error {
	return l.conn.Ping(ctx)
}

// Resign releases the lock.
func (l *Leadership) Resign(ctx context.Context) {
	_, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, int64(leaderLock))
	if err != nil {
		// The session's lock goes with its connection.
		_ = l.conn.Conn().Close(ctx)
	}
	l.conn.Release()
}
