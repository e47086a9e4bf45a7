package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/internal/errdefs"
)

// SnapshotLocation is one node's copy of a memory snapshot. A snapshot
// taken through a control plane has one; each node it is sent to for a
// restore (a create from it, a fork's copy) adds one, so later restores
// there need no transfer.
type SnapshotLocation struct {
	ID             string // the snapshot's id, the same on every node
	Name           string // optional
	Node           string
	Runtime        string
	RuntimeVersion string
	SizeBytes      int64
	// Record is the snapshot's public record (apiv1.Snapshot) as its
	// first node answered it.
	Record  json.RawMessage
	Created time.Time
}

// AddSnapshot records that node l.Node holds snapshot l.ID; recording it
// again changes nothing.
func (s *Store) AddSnapshot(ctx context.Context, l SnapshotLocation) error {
	var name *string
	if l.Name != "" {
		name = &l.Name
	}
	if len(l.Record) == 0 {
		l.Record = json.RawMessage(`{}`)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO snapshot_locations (snapshot_id, node_id, name, runtime, runtime_version, size_bytes, record)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (snapshot_id, node_id) DO NOTHING`,
		l.ID, l.Node, name, l.Runtime, l.RuntimeVersion, l.SizeBytes, []byte(l.Record))
	if err != nil {
		return fmt.Errorf("recording snapshot %s on node %s: %w", l.ID, l.Node, err)
	}
	return nil
}

const snapshotColumns = `snapshot_id, node_id, coalesce(name, ''), runtime, runtime_version, size_bytes, record, created_at`

func scanSnapshot(row pgx.CollectableRow) (SnapshotLocation, error) {
	var l SnapshotLocation
	var rec []byte
	err := row.Scan(&l.ID, &l.Node, &l.Name, &l.Runtime, &l.RuntimeVersion, &l.SizeBytes, &rec, &l.Created)
	l.Record = rec
	return l, err
}

// SnapshotLocations returns the locations of the snapshot whose id (or
// else name) is ref, the first recorded first; a name held by several
// snapshots (taken on nodes directly) finds the newest. NotFound when the
// cluster knows no such snapshot.
func (s *Store) SnapshotLocations(ctx context.Context, ref string) ([]SnapshotLocation, error) {
	rows, err := s.pool.Query(ctx, `WITH one AS (
			SELECT snapshot_id FROM snapshot_locations WHERE snapshot_id = $1 OR name = $1
			ORDER BY snapshot_id = $1 DESC, created_at DESC LIMIT 1)
		SELECT `+snapshotColumns+` FROM snapshot_locations WHERE snapshot_id = (SELECT snapshot_id FROM one)
		ORDER BY created_at, node_id`, ref)
	if err != nil {
		return nil, fmt.Errorf("looking up snapshot %s: %w", ref, err)
	}
	ls, err := pgx.CollectRows(rows, scanSnapshot)
	if err != nil {
		return nil, fmt.Errorf("looking up snapshot %s: %w", ref, err)
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("%w: snapshot %s", errdefs.ErrNotFound, ref)
	}
	return ls, nil
}

// Snapshots lists every snapshot the cluster knows, oldest first, each
// once (its first location).
func (s *Store) Snapshots(ctx context.Context) ([]SnapshotLocation, error) {
	rows, err := s.pool.Query(ctx, `SELECT * FROM (
			SELECT DISTINCT ON (snapshot_id) `+snapshotColumns+` FROM snapshot_locations
			ORDER BY snapshot_id, created_at, node_id) first
		ORDER BY created_at, snapshot_id`)
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	ls, err := pgx.CollectRows(rows, scanSnapshot)
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	return ls, nil
}

// RemoveSnapshotLocation forgets node's copy of snapshot id (removed
// there, or found missing); the others stay.
func (s *Store) RemoveSnapshotLocation(ctx context.Context, id, node string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM snapshot_locations WHERE snapshot_id = $1 AND node_id = $2`, id, node)
	if err != nil {
		return fmt.Errorf("forgetting snapshot %s on node %s: %w", id, node, err)
	}
	return nil
}

// RemoveSnapshot forgets snapshot id everywhere.
func (s *Store) RemoveSnapshot(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM snapshot_locations WHERE snapshot_id = $1`, id)
	if err != nil {
		return fmt.Errorf("forgetting snapshot %s: %w", id, err)
	}
	return nil
}
