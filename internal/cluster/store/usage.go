package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/internal/usage"
)

// Each node ships its sandboxes' usage here (package node's shipper): the
// running figures now and then while a sandbox lives (EndedAt zero), the
// settled record at its end. One row per sandbox and node (a sandbox
// moved to another node has one on each): a settled record replaces the
// running figures, and running figures never replace a settled record
// (a late shipment of them).

// MaxUsageShip bounds one shipment of usage records.
const MaxUsageShip = 1000

// ShipUsage stores node's usage records (at most MaxUsageShip).
func (s *Store) ShipUsage(ctx context.Context, node string, rs []usage.Record) error {
	if len(rs) == 0 {
		return nil
	}
	if len(rs) > MaxUsageShip {
		return fmt.Errorf("shipping %d usage records: at most %d at once", len(rs), MaxUsageShip)
	}
	n := len(rs)
	ids, runtimes, tags, totals := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	started, ended := make([]time.Time, n), make([]*time.Time, n)
	for i, r := range rs {
		tg, err := json.Marshal(r.Tags)
		if err != nil {
			return fmt.Errorf("shipping the usage of %s: %w", r.SandboxID, err)
		}
		if r.Tags == nil {
			tg = []byte("{}")
		}
		tt, err := json.Marshal(r.Totals)
		if err != nil {
			return fmt.Errorf("shipping the usage of %s: %w", r.SandboxID, err)
		}
		ids[i], runtimes[i], tags[i], totals[i], started[i] = r.SandboxID, r.Runtime, string(tg), string(tt), r.StartedAt
		if !r.EndedAt.IsZero() {
			e := r.EndedAt
			ended[i] = &e
		}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO usage_records AS r (sandbox_id, node_id, runtime, tags, started_at, ended_at, totals)
		SELECT u.id, $1, u.runtime, u.tags::jsonb, u.started, u.ended, u.totals::jsonb
		FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::text[]) AS u(id, runtime, tags, started, ended, totals)
		ON CONFLICT (node_id, sandbox_id) DO UPDATE SET runtime = excluded.runtime, tags = excluded.tags,
			started_at = excluded.started_at, ended_at = excluded.ended_at, totals = excluded.totals, shipped_at = now()
		WHERE r.ended_at IS NULL OR excluded.ended_at IS NOT NULL`, node, ids, runtimes, tags, started, ended, totals)
	if err != nil {
		return fmt.Errorf("shipping %d usage records of node %s: %w", n, node, err)
	}
	return nil
}

// UsageSettledThrough is the latest end among node's shipped settled
// records (zero when none).
func (s *Store) UsageSettledThrough(ctx context.Context, node string) (time.Time, error) {
	var t *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT max(ended_at) FROM usage_records WHERE node_id = $1`, node).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("reading node %s's shipped usage: %w", node, err)
	}
	if t == nil {
		return time.Time{}, nil
	}
	return t.UTC(), nil
}

// ListUsage returns the usage of the sandboxes that ran at some time in
// [from, to) (a zero to: until now), ended or not, at most limit; a
// sandbox that ran on several nodes has a record of each.
func (s *Store) ListUsage(ctx context.Context, from, to time.Time, limit int) ([]usage.Record, error) {
	var toArg *time.Time
	if !to.IsZero() {
		toArg = &to
	}
	rows, err := s.pool.Query(ctx, `SELECT sandbox_id, runtime, tags::text, started_at, ended_at, totals::text FROM usage_records
		WHERE (ended_at IS NULL OR ended_at >= $1) AND ($2::timestamptz IS NULL OR started_at < $2)
		ORDER BY started_at, sandbox_id, node_id LIMIT $3`, from, toArg, limit)
	if err != nil {
		return nil, fmt.Errorf("listing the cluster's usage: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanUsage)
	if err != nil {
		return nil, fmt.Errorf("listing the cluster's usage: %w", err)
	}
	return out, nil
}

func scanUsage(row pgx.CollectableRow) (usage.Record, error) {
	var r usage.Record
	var tags, totals string
	var ended *time.Time
	if err := row.Scan(&r.SandboxID, &r.Runtime, &tags, &r.StartedAt, &ended, &totals); err != nil {
		return r, err
	}
	r.StartedAt = r.StartedAt.UTC()
	if ended != nil {
		r.EndedAt = ended.UTC()
	}
	if err := json.Unmarshal([]byte(tags), &r.Tags); err != nil {
		return r, fmt.Errorf("usage of %s: tags: %w", r.SandboxID, err)
	}
	if err := json.Unmarshal([]byte(totals), &r.Totals); err != nil {
		return r, fmt.Errorf("usage of %s: totals: %w", r.SandboxID, err)
	}
	return r, nil
}
