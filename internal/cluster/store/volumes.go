package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/internal/errdefs"
)

// A volume lives on one node: its ext4 image is in that node's state
// directory. volume_locations records which node, so calls on the volume
// and creates that mount it go there.

// VolumeLocation is where a volume is.
type VolumeLocation struct {
	Name    string
	Node    string
	SizeGiB int64
	Created time.Time
	// NodeState is the node's state (NodeReady, NodeLost) when read.
	NodeState string
}

// PlaceVolume records volume name of sizeGiB on a node and returns that
// node: the one named by node (""
// for any), ready, not draining, heard from within fresh, with at least
// the volume's size of free disk (a volume's image is allocated, not
// sparse); of those, one at random. The name is taken in the same
// statement, so two creates of one name never both win: the second is
// ErrAlreadyExists. No such node is ErrResourceExhausted. The caller
// forgets the row (RemoveVolume) when the node then fails the create.
func (s *Store) PlaceVolume(ctx context.Context, name string, sizeGiB int64, node string, fresh time.Duration) (Node, error) {
	var id string
	err := s.pool.QueryRow(ctx, `INSERT INTO volume_locations (name, node_id, size_gib)
		SELECT $1, id, $2 FROM nodes WHERE state = 'ready' AND NOT draining
			AND heartbeat_at > now() - $3 * interval '1 second' AND disk_mb >= $2 * 1024
			AND ($4 = '' OR id = $4)
		ORDER BY random() LIMIT 1
		ON CONFLICT (name) DO NOTHING RETURNING node_id`, name, sizeGiB, seconds(fresh), node).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, lerr := s.VolumeLocation(ctx, name); lerr == nil {
			return Node{}, fmt.Errorf("%w: a volume named %s already exists in the cluster", errdefs.ErrAlreadyExists, name)
		}
		where := "no ready node"
		if node != "" {
			where = "node " + node + " is not ready, is draining or"
		}
		return Node{}, fmt.Errorf("%w: %s has %d GiB of free disk for volume %s", errdefs.ErrResourceExhausted, where, sizeGiB, name)
	}
	if err != nil {
		return Node{}, fmt.Errorf("placing volume %s: %w", name, err)
	}
	return s.Node(ctx, id)
}

const volumeColumns = `v.name, v.node_id, v.size_gib, v.created_at, n.state`

func scanVolume(row pgx.CollectableRow) (VolumeLocation, error) {
	var l VolumeLocation
	err := row.Scan(&l.Name, &l.Node, &l.SizeGiB, &l.Created, &l.NodeState)
	return l, err
}

// VolumeLocation returns where volume name is; NotFound when the cluster
// knows no such volume.
func (s *Store) VolumeLocation(ctx context.Context, name string) (VolumeLocation, error) {
	ls, err := s.VolumeLocations(ctx, []string{name})
	if err != nil {
		return VolumeLocation{}, err
	}
	if len(ls) == 0 {
		return VolumeLocation{}, fmt.Errorf("%w: volume %s (the cluster knows no such volume)", errdefs.ErrNotFound, name)
	}
	return ls[0], nil
}

// VolumeLocations returns where each of names is, by name; a name the
// cluster does not know is left out.
func (s *Store) VolumeLocations(ctx context.Context, names []string) ([]VolumeLocation, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+volumeColumns+` FROM volume_locations v JOIN nodes n ON n.id = v.node_id
		WHERE v.name = ANY($1) ORDER BY v.name`, names)
	if err != nil {
		return nil, fmt.Errorf("looking up volumes: %w", err)
	}
	ls, err := pgx.CollectRows(rows, scanVolume)
	if err != nil {
		return nil, fmt.Errorf("looking up volumes: %w", err)
	}
	return ls, nil
}

// Volumes lists every volume the cluster knows, by name.
func (s *Store) Volumes(ctx context.Context) ([]VolumeLocation, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+volumeColumns+` FROM volume_locations v JOIN nodes n ON n.id = v.node_id ORDER BY v.name`)
	if err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	ls, err := pgx.CollectRows(rows, scanVolume)
	if err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	return ls, nil
}

// RemoveVolume forgets volume name (removed on its node, or its create
// failed there).
func (s *Store) RemoveVolume(ctx context.Context, name string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM volume_locations WHERE name = $1`, name); err != nil {
		return fmt.Errorf("forgetting volume %s: %w", name, err)
	}
	return nil
}
