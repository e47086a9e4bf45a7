package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/internal/errdefs"
)

// Drain move states: a paused sandbox found on a draining node waits
// (pending), is being moved (moving, its mover beating updated_at), was
// moved (moved, to target), or stays: stuck (it cannot be moved as it
// is: running, volumes; looked at again at each scan) or failed (a move
// was tried and undone; not tried again until the node is drained anew).
const (
	MovePending = "pending"
	MoveMoving  = "moving"
	MoveMoved   = "moved"
	MoveStuck   = "stuck"
	MoveFailed  = "failed"
)

// DrainMove is one sandbox of a draining node.
type DrainMove struct {
	Sandbox string
	Node    string // the draining node it is (or was) on
	State   string
	Reason  string // why it stays (stuck, failed)
	// Target and Snapshot are the node a move chose and the snapshot it
	// took, recorded as it goes so that a move whose control plane died
	// can be finished or undone by the next.
	Target, Snapshot string
	Updated          time.Time
}

// DrainState is a draining node's progress.
type DrainState struct {
	Node    string
	Started time.Time
	// Scanned: the leader listed the node since the drain began, so the
	// moves below are all there is (so far).
	Scanned bool
	Moves   []DrainMove
}

// StartDrain begins a drain of node id anew: moves recorded by an
// earlier drain are forgotten (failed ones are tried again), except
// those in flight.
func (s *Store) StartDrain(ctx context.Context, id string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM drain_moves WHERE node_id = $1 AND state <> 'moving'`, id); err != nil {
			return fmt.Errorf("starting the drain of node %s: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO drains (node_id) VALUES ($1)
			ON CONFLICT (node_id) DO UPDATE SET started_at = now(), scanned_at = NULL`, id); err != nil {
			return fmt.Errorf("starting the drain of node %s: %w", id, err)
		}
		return nil
	})
}

// StopDrain forgets node id's drain (undrain); moves in flight finish.
func (s *Store) StopDrain(ctx context.Context, id string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM drain_moves WHERE node_id = $1 AND state <> 'moving'`, id); err != nil {
			return fmt.Errorf("stopping the drain of node %s: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM drains WHERE node_id = $1`, id); err != nil {
			return fmt.Errorf("stopping the drain of node %s: %w", id, err)
		}
		return nil
	})
}

// Found is a sandbox a scan of a draining node found: Stuck says why it
// cannot move ("" when it can: it is paused).
type Found struct {
	Sandbox, Stuck string
}

// ScanDrain records what the leader found on draining node id: each
// sandbox pending or stuck (one already moving, moved or failed is left
// as it is), pending and stuck rows of sandboxes no longer there dropped
// (they ended), and the node marked scanned.
func (s *Store) ScanDrain(ctx context.Context, id string, found []Found) error {
	ids := make([]string, len(found))
	for i, f := range found {
		ids[i] = f.Sandbox
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM drain_moves WHERE node_id = $1 AND state IN ('pending', 'stuck') AND NOT (sandbox_id = ANY($2))`,
			id, ids); err != nil {
			return err
		}
		for _, f := range found {
			state := MovePending
			if f.Stuck != "" {
				state = MoveStuck
			}
			if _, err := tx.Exec(ctx, `INSERT INTO drain_moves (sandbox_id, node_id, state, reason) VALUES ($1, $2, $3, $4)
				ON CONFLICT (node_id, sandbox_id) DO UPDATE SET state = EXCLUDED.state, reason = EXCLUDED.reason, updated_at = now()
				WHERE drain_moves.state IN ('pending', 'stuck') AND (drain_moves.state, drain_moves.reason) <> (EXCLUDED.state, EXCLUDED.reason)`,
				f.Sandbox, id, state, f.Stuck); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `UPDATE drains SET scanned_at = now() WHERE node_id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the scan of draining node %s: %w", id, err)
	}
	return nil
}

const moveColumns = `sandbox_id, node_id, state, reason, target, snapshot, updated_at`

func scanMove(row pgx.CollectableRow) (DrainMove, error) {
	var m DrainMove
	return m, row.Scan(&m.Sandbox, &m.Node, &m.State, &m.Reason, &m.Target, &m.Snapshot, &m.Updated)
}

// ClaimMoves takes up to limit moves of node id to run: pending ones, and
// moving ones whose mover has not beaten for stale (its control plane
// died; Target and Snapshot say how far it got). Two instances never
// claim the same move.
func (s *Store) ClaimMoves(ctx context.Context, id string, limit int, stale time.Duration) ([]DrainMove, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `UPDATE drain_moves SET state = 'moving', updated_at = now()
		WHERE (node_id, sandbox_id) IN (SELECT node_id, sandbox_id FROM drain_moves
			WHERE node_id = $1 AND (state = 'pending' OR state = 'moving' AND updated_at < now() - $3 * interval '1 second')
			ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING `+moveColumns, id, limit, seconds(stale))
	if err != nil {
		return nil, fmt.Errorf("claiming the moves of node %s: %w", id, err)
	}
	ms, err := pgx.CollectRows(rows, scanMove)
	if err != nil {
		return nil, fmt.Errorf("claiming the moves of node %s: %w", id, err)
	}
	return ms, nil
}

// MoveProgress records how far a move got (its target, its snapshot) and
// that its mover lives.
func (s *Store) MoveProgress(ctx context.Context, m DrainMove) error {
	_, err := s.pool.Exec(ctx, `UPDATE drain_moves SET target = $3, snapshot = $4, updated_at = now()
		WHERE node_id = $1 AND sandbox_id = $2 AND state = 'moving'`, m.Node, m.Sandbox, m.Target, m.Snapshot)
	if err != nil {
		return fmt.Errorf("recording the move of sandbox %s: %w", m.Sandbox, err)
	}
	return nil
}

// MoveDone records a move's end: moved (to m.Target), or failed or
// stuck with reason.
func (s *Store) MoveDone(ctx context.Context, m DrainMove, state, reason string) error {
	_, err := s.pool.Exec(ctx, `UPDATE drain_moves SET state = $3, reason = $4, target = $5, snapshot = '', updated_at = now()
		WHERE node_id = $1 AND sandbox_id = $2`, m.Node, m.Sandbox, state, reason, m.Target)
	if err != nil {
		return fmt.Errorf("recording the end of sandbox %s's move: %w", m.Sandbox, err)
	}
	return nil
}

// Drains returns every draining node's progress, by node.
func (s *Store) Drains(ctx context.Context) (map[string]DrainState, error) {
	rows, err := s.pool.Query(ctx, `SELECT node_id, started_at, scanned_at IS NOT NULL FROM drains`)
	if err != nil {
		return nil, fmt.Errorf("reading the drains: %w", err)
	}
	out := map[string]DrainState{}
	ds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DrainState, error) {
		var d DrainState
		return d, r.Scan(&d.Node, &d.Started, &d.Scanned)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the drains: %w", err)
	}
	for _, d := range ds {
		out[d.Node] = d
	}
	rows, err = s.pool.Query(ctx, `SELECT `+moveColumns+` FROM drain_moves ORDER BY node_id, sandbox_id`)
	if err != nil {
		return nil, fmt.Errorf("reading the drains: %w", err)
	}
	ms, err := pgx.CollectRows(rows, scanMove)
	if err != nil {
		return nil, fmt.Errorf("reading the drains: %w", err)
	}
	for _, m := range ms {
		if d, ok := out[m.Node]; ok {
			d.Moves = append(d.Moves, m)
			out[m.Node] = d
		}
	}
	return out, nil
}

// Move turns sandbox id's placement on node from into one on the node
// of reservation rsv, in one transaction: the reservation's resources
// (already counted on its node) become the placement's, and from gets
// the placement's old ones back. FailedPrecondition when the sandbox is
// no longer placed on from; Unavailable when the reservation is gone.
func (s *Store) Move(ctx context.Context, id, from, rsv string) error {
	return retry(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var cpu, mem, disk int64
			err := tx.QueryRow(ctx, `SELECT cpu_milli, memory_mb, disk_mb FROM placements
				WHERE id = $1 AND node_id = $2 AND state = 'placed' FOR UPDATE`, id, from).Scan(&cpu, &mem, &disk)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: sandbox %s is no longer placed on node %s", errdefs.ErrFailedPrecondition, id, from)
			}
			if err != nil {
				return err
			}
			var to string
			var rc, rm, rd int64
			err = tx.QueryRow(ctx, `DELETE FROM placements WHERE id = $1 AND state = 'reserved'
				RETURNING node_id, cpu_milli, memory_mb, disk_mb`, rsv).Scan(&to, &rc, &rm, &rd)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: moving sandbox %s: reservation %s is gone (its node was lost meanwhile)", errdefs.ErrUnavailable, id, rsv)
			}
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE placements SET node_id = $2, cpu_milli = $3, memory_mb = $4, disk_mb = $5, updated_at = now()
				WHERE id = $1`, id, to, rc, rm, rd); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE nodes SET used_cpu_milli = used_cpu_milli - $2, used_memory_mb = used_memory_mb - $3,
				used_disk_mb = used_disk_mb - $4, used_sandboxes = used_sandboxes - 1 WHERE id = $1`, from, cpu, mem, disk)
			return err
		})
	})
}
