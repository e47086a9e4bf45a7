package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// sampleSize is how many eligible nodes sampledCandidates draws: enough
// for the power of two choices and a few admissions lost to a node that
// filled meanwhile, few enough that summing their placements is cheap.
const sampleSize = 8

// sampledCandidates are up to sampleSize eligible nodes drawn at random
// (ready, fresh, with r's runtime and labels, not excluded), with what
// they have left, of which those with room for r. Unlike candidates it
// sums the live placements of the drawn nodes only (through
// placements_node_live), not of every node: a create's cost no longer
// grows with the sandboxes the cluster runs. Drawing then picking two is
// the power of two choices as before; when no drawn node has room, the
// caller falls back to candidates, so a create is refused only when no
// node at all has room.
//
// The draw itself reads a sample of the table's pages first
// (TABLESAMPLE SYSTEM, sized from the planner's row count for about
// pageSampleRows rows), so it does not read every node's row either; when
// fewer than two of those have room, it draws from every node.
func (s *Store) sampledCandidates(ctx context.Context, r Request) ([]free, error) {
	cands, err := s.draw(ctx, r, pageSample)
	if err != nil || len(cands) >= 2 {
		return cands, err
	}
	return s.draw(ctx, r, "")
}

// pageSampleRows is about how many node rows the page sample reads.
const pageSampleRows = 256

// pageSample is the nodes' page sample: pageSampleRows of reltuples, in
// percent (all pages while the table has not been analyzed, reltuples -1).
var pageSample = fmt.Sprintf(`TABLESAMPLE SYSTEM ((SELECT least(100, 100.0 * %d / greatest(reltuples, 1))
	FROM pg_class WHERE oid = 'nodes'::regclass))`, pageSampleRows)

// draw draws sampleSize eligible nodes (from the sample of the nodes
// table that sample names, or all of it) and returns those with room.
func (s *Store) draw(ctx context.Context, r Request, sample string) ([]free, error) {
	labels := r.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	exclude := r.Exclude
	if exclude == nil {
		exclude = []string{}
	}
	rows, err := s.pool.Query(ctx, `WITH drawn AS (
			SELECT n.id, n.cpu_milli, n.memory_mb, n.disk_mb, n.max_sandboxes FROM nodes n `+sample+`
			WHERE n.state = 'ready' AND n.heartbeat_at > now() - $1 * interval '1 second'
				AND $2 = ANY(n.runtimes) AND n.labels @> $3 AND NOT (n.id = ANY($4))
			ORDER BY random() LIMIT $5)
		SELECT d.id, d.cpu_milli - u.cpu, d.memory_mb - u.mem, d.disk_mb - u.disk, d.max_sandboxes - u.n
		FROM drawn d CROSS JOIN LATERAL (
			SELECT coalesce(sum(p.cpu_milli), 0) AS cpu, coalesce(sum(p.memory_mb), 0) AS mem,
				coalesce(sum(p.disk_mb), 0) AS disk, count(*) AS n
			FROM placements p WHERE p.node_id = d.id AND p.state IN `+liveStates+`) u`,
		seconds(r.FreshWithin), r.Runtime, labels, exclude, sampleSize)
	if err != nil {
		return nil, fmt.Errorf("placing a sandbox: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (free, error) {
		var f free
		err := row.Scan(&f.id, &f.cpu, &f.mem, &f.disk, &f.slots)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("placing a sandbox: %w", err)
	}
	out := all[:0]
	for _, f := range all {
		if f.fits(r) {
			out = append(out, f)
		}
	}
	return out, nil
}
