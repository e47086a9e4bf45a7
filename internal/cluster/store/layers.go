package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// NodeLayer is one uploaded layer as one node holds it.
type NodeLayer struct {
	Node   string
	Digest string
	Size   int64
}

// RecordLayer records that node holds the uploaded layer digest: a
// control plane calls it when an upload it relayed succeeded, a node
// when it fetched the layer from another.
func (s *Store) RecordLayer(ctx context.Context, l NodeLayer) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO node_layers (node_id, digest, size) VALUES ($1, $2, $3)
		ON CONFLICT (digest, node_id) DO UPDATE SET size = EXCLUDED.size, recorded_at = now()`, l.Node, l.Digest, l.Size)
	if err != nil {
		return fmt.Errorf("recording layer %s on node %s: %w", l.Digest, l.Node, err)
	}
	return nil
}

// ForgetLayer records that node no longer holds layer digest (it pruned
// it, or answered that it lacks it).
func (s *Store) ForgetLayer(ctx context.Context, node, digest string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM node_layers WHERE node_id = $1 AND digest = $2`, node, digest)
	return err
}

// LayerHolders are the ready nodes recorded as holding each of digests,
// newest record first: a digest no ready node holds is absent.
func (s *Store) LayerHolders(ctx context.Context, digests []string) (map[string][]NodeLayer, error) {
	rows, err := s.pool.Query(ctx, `SELECT l.node_id, l.digest, l.size FROM node_layers l JOIN nodes n ON n.id = l.node_id
		WHERE n.state = 'ready' AND l.digest = ANY($1) ORDER BY l.recorded_at DESC`, digests)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's layers: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NodeLayer, error) {
		var l NodeLayer
		err := r.Scan(&l.Node, &l.Digest, &l.Size)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's layers: %w", err)
	}
	out := make(map[string][]NodeLayer, len(digests))
	for _, l := range list {
		out[l.Digest] = append(out[l.Digest], l)
	}
	return out, nil
}
