package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrateLock is the advisory lock key every instance takes before
// migrating; a transaction-scoped lock, so a crash mid-way frees it.
const migrateLock = 0x636f7272616c01 // "corral" 1

// migrations are the schema's versions, in order: version i+1 is
// migrations[i]. Append only; a released one never changes.
var migrations = []string{
	// 1: nodes and placements.
	`CREATE TABLE nodes (
		id               text PRIMARY KEY,
		address          text NOT NULL,
		cpu_milli        bigint NOT NULL,
		memory_mb        bigint NOT NULL,
		disk_mb          bigint NOT NULL,
		max_sandboxes    integer NOT NULL,
		-- What the live (reserved and placed) placements take, kept in
		-- the same statements that change them (place.go).
		used_cpu_milli   bigint NOT NULL DEFAULT 0 CHECK (used_cpu_milli >= 0),
		used_memory_mb   bigint NOT NULL DEFAULT 0 CHECK (used_memory_mb >= 0),
		used_disk_mb     bigint NOT NULL DEFAULT 0 CHECK (used_disk_mb >= 0),
		used_sandboxes   integer NOT NULL DEFAULT 0 CHECK (used_sandboxes >= 0),
		runtimes         text[] NOT NULL,
		kvm              boolean NOT NULL,
		labels           jsonb NOT NULL DEFAULT '{}',
		credential_nonce text NOT NULL,
		credential_hash  text NOT NULL,
		state            text NOT NULL CHECK (state IN ('ready', 'lost')),
		-- A drained node takes no new sandboxes; it keeps its own.
		draining         boolean NOT NULL DEFAULT false,
		joined_at        timestamptz NOT NULL DEFAULT now(),
		heartbeat_at     timestamptz NOT NULL DEFAULT now(),
		lost_at          timestamptz
	);
	CREATE TABLE placements (
		id         text PRIMARY KEY,
		name       text,
		node_id    text NOT NULL REFERENCES nodes (id),
		state      text NOT NULL CHECK (state IN ('reserved', 'placed', 'ending', 'lost', 'ended')),
		runtime    text NOT NULL,
		cpu_milli  bigint NOT NULL,
		memory_mb  bigint NOT NULL,
		disk_mb    bigint NOT NULL,
		reaped     boolean NOT NULL DEFAULT false,
		created_at timestamptz NOT NULL DEFAULT now(),
		updated_at timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX placements_node_live ON placements (node_id) WHERE state IN ('reserved', 'placed', 'ending');
	CREATE INDEX placements_node_lost ON placements (node_id) WHERE state = 'lost' AND NOT reaped;
	CREATE UNIQUE INDEX placements_placed_name ON placements (name) WHERE state IN ('placed', 'ending');`,
	// 2: each node's random position in the placement sample (candidates
	// walk its index from a random start; place.go). ADD COLUMN evaluates
	// a volatile default for every existing row. Every admission and
	// heartbeat rewrites a node's row: room left on each page lets those
	// be heap-only updates, which add no index entries for the walk to
	// step over.
	`ALTER TABLE nodes ADD COLUMN place_key double precision NOT NULL DEFAULT random();
	CREATE INDEX nodes_place_key ON nodes (place_key);
	ALTER TABLE nodes SET (fillfactor = 50);`,
	// 3: where memory snapshots are (snapshots.go), and the nodes' runtime versions.
	`CREATE TABLE snapshot_locations (
		snapshot_id     text NOT NULL,
		node_id         text NOT NULL REFERENCES nodes (id),
		name            text,
		runtime         text NOT NULL,
		runtime_version text NOT NULL,
		size_bytes      bigint NOT NULL,
		-- The snapshot's public record (apiv1.Snapshot) as its first node
		-- answered it.
		record          jsonb NOT NULL,
		created_at      timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (snapshot_id, node_id)
	);
	CREATE INDEX snapshot_locations_name ON snapshot_locations (name) WHERE name IS NOT NULL;
	-- Each runtime's version on the node (runtime -> version): a memory
	-- snapshot restores only where its runtime's version is the same.
	ALTER TABLE nodes ADD COLUMN runtime_versions jsonb NOT NULL DEFAULT '{}';`,
	// 4: which node holds which image, and each node's ready warm
	// sandboxes (images.go), in tables of their own: placement finds the
	// nodes with a bonus through their indexes, and a report does not
	// rewrite the nodes row.
	`CREATE TABLE node_images (
		node_id    text NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
		digest     text NOT NULL,
		tags       text[] NOT NULL DEFAULT '{}',
		size       bigint NOT NULL DEFAULT 0,
		-- When the row last changed: a heartbeat that no longer lists
		-- an image drops it only once this is older than a grace.
		updated_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (node_id, digest)
	);
	CREATE INDEX node_images_digest ON node_images (digest);
	CREATE INDEX node_images_tags ON node_images USING gin (tags);
	-- The node's warm pools with sandboxes ready, by "runtime/image".
	CREATE TABLE node_warm (
		node_id text NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
		key     text NOT NULL,
		ready   integer NOT NULL CHECK (ready > 0),
		PRIMARY KEY (key, node_id)
	);`,
	// 5: where a node serves E2B's envd face ('': it does not).
	`ALTER TABLE nodes ADD COLUMN envd_address text NOT NULL DEFAULT ''`,
	// 6: which node holds which uploaded layer (layers.go): a build's
	// copy steps upload their files as layers before the build, which
	// then runs where they are or has them fetched there.
	`CREATE TABLE node_layers (
		node_id     text NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
		digest      text NOT NULL,
		size        bigint NOT NULL DEFAULT 0,
		recorded_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (digest, node_id)
	)`,
	// 7: where each volume is (a volume lives on one node), and the
	// cluster's secrets, their values sealed with a key derived from the
	// join token (secrets.go).
	`CREATE TABLE volume_locations (
		name       text PRIMARY KEY,
		node_id    text NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
		size_gib   integer NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX volume_locations_node ON volume_locations (node_id);
	CREATE TABLE cluster_secrets (
		name       text PRIMARY KEY,
		keys       text[] NOT NULL,
		sealed     text NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now(),
		updated_at timestamptz NOT NULL DEFAULT now()
	);`,
	// 8: a drain's moves of paused sandboxes (drain.go): one row per
	// drained node (when its drain began, when the leader last listed
	// it) and one per sandbox found there.
	`CREATE TABLE drains (
		node_id    text PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
		started_at timestamptz NOT NULL DEFAULT now(),
		scanned_at timestamptz
	);
	CREATE TABLE drain_moves (
		sandbox_id text NOT NULL,
		node_id    text NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
		state      text NOT NULL CHECK (state IN ('pending', 'moving', 'moved', 'stuck', 'failed')),
		reason     text NOT NULL DEFAULT '',
		target     text NOT NULL DEFAULT '',
		snapshot   text NOT NULL DEFAULT '',
		updated_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (node_id, sandbox_id)
	);`,
	// 9: each placed sandbox's public record (records.go), so a list
	// through a control plane reads the database, not every node: the
	// node's answer (apiv1.Sandbox), its state as its node last said it,
	// its tags (GIN: containment and key filters) and its creation time
	// in nanoseconds, the listing order (with the id) and cursor.
	`ALTER TABLE placements ADD COLUMN record jsonb, ADD COLUMN sandbox_state text,
		ADD COLUMN tags jsonb NOT NULL DEFAULT '{}', ADD COLUMN created_ns bigint;
	UPDATE placements SET created_ns = (extract(epoch FROM created_at) * 1000000000)::bigint WHERE state <> 'reserved';
	CREATE INDEX placements_listed ON placements (created_ns, id) WHERE created_ns IS NOT NULL;
	-- The live ones apart: a list of running sandboxes does not step
	-- over the ended ones, which placements keep.
	CREATE INDEX placements_listed_live ON placements (created_ns, id) WHERE state = 'placed' AND created_ns IS NOT NULL;
	CREATE INDEX placements_tags ON placements USING gin (tags)`,
	// 10: the SPKI SHA-256 of the node's TLS certificate, which callers pin
	// (nodetls, tls.go).
	`ALTER TABLE nodes ADD COLUMN tls_fingerprint text NOT NULL DEFAULT ''`,
	// 11: the nodes' audit trails and usage records, shipped by each node
	// (audit.go, usage.go).
	auditUsageSchema,
}

// Migrate brings the schema to the newest version. Several instances may
// call it at once: each takes a transaction-scoped advisory lock first, so
// one applies what is missing and the others then find nothing to do.
func (s *Store) Migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
			return fmt.Errorf("migrating the cluster database: locking: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("migrating the cluster database: %w", err)
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
			return fmt.Errorf("migrating the cluster database: %w", err)
		}
		if have > len(migrations) {
			return fmt.Errorf("the cluster database's schema is version %d, newer than this binary's %d: upgrade corral", have, len(migrations))
		}
		for v := have + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("migrating the cluster database to version %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v); err != nil {
				return fmt.Errorf("migrating the cluster database to version %d: %w", v, err)
			}
		}
		return nil
	})
}

// SchemaVersion is the version the database is at.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}
