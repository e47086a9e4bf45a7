// Package store is a cluster's shared state in PostgreSQL (pgx): the nodes
// (their capacity, runtimes, labels, heartbeat, state and the hash of their
// credential) and the placement of each sandbox (which node runs it and
// what it asked for). A node's own SQLite stays the truth about what that
// node runs; this is the truth about where a sandbox is and what each node
// has given out. Admission happens in a transaction on the node's row, so
// control instances placing at once never overcommit a node.
//
// It imports errdefs, seal and usage only; control planes and nodes import it.
package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is a pool of connections to the cluster's database.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects to the database at url and migrates its schema (Migrate).
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("cluster database url: %w", err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster database: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to the cluster database: %w", err)
	}
	s := &Store{pool: pool}
	if err := s.Migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// seconds is d as PostgreSQL's float seconds (multiplied by interval '1s'
// in the queries).
func seconds(d time.Duration) float64 { return d.Seconds() }
