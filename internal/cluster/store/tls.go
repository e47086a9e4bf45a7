package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"corral/internal/errdefs"
)

// NodePin is a node's TLS fingerprint as registered.
type NodePin struct {
	Node        string
	Fingerprint string
}

// SetTLSFingerprint records node id's TLS fingerprint (the node proving
// itself with credHash), as it joins: a restart with a new key replaces
// the old one.
func (s *Store) SetTLSFingerprint(ctx context.Context, id, credHash, fingerprint string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE nodes SET tls_fingerprint = $3 WHERE id = $1 AND credential_hash = $2`, id, credHash, fingerprint)
	if err != nil {
		return fmt.Errorf("registering node %s's TLS fingerprint: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: node %s is not registered with this credential", errdefs.ErrNotFound, id)
	}
	return nil
}

// TLSPins are the fingerprints of the nodes whose API or envd address is
// one of urls (the ways of writing one host:port), lost nodes included
// (a lost node that answers again is called); nodes with none
// registered are left out.
func (s *Store) TLSPins(ctx context.Context, urls []string) ([]NodePin, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, tls_fingerprint FROM nodes
		WHERE (address = ANY($1) OR envd_address = ANY($1)) AND tls_fingerprint <> '' ORDER BY id`, urls)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[NodePin])
}

// TLSFingerprints are the registered fingerprints by node id (nodes with
// none left out).
func (s *Store) TLSFingerprints(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, tls_fingerprint FROM nodes WHERE tls_fingerprint <> ''`)
	if err != nil {
		return nil, err
	}
	pins, err := pgx.CollectRows(rows, pgx.RowToStructByPos[NodePin])
	out := make(map[string]string, len(pins))
	for _, p := range pins {
		out[p.Node] = p.Fingerprint
	}
	return out, err
}
