package store

// auditUsageSchema is migration 6: each node's audit trail and usage
// records, as the node ships them (audit.go, usage.go).
const auditUsageSchema = `CREATE TABLE audit_entries (
	-- id is the order the cluster received entries in: a page continues
	-- after an id, and shipping takes auditShipLock so ids commit in
	-- order (a reader never sees a later id before an earlier one).
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	node_id    text NOT NULL REFERENCES nodes (id),
	seq        bigint NOT NULL,
	-- The entry exactly as the node hashed it: its time in Unix
	-- nanoseconds, its fields, its previous hash and hash.
	time_ns    bigint NOT NULL,
	kind       text NOT NULL,
	sandbox_id text NOT NULL DEFAULT '',
	caller     text NOT NULL DEFAULT '',
	fields     jsonb NOT NULL DEFAULT '{}',
	prev_hash  text NOT NULL,
	hash       text NOT NULL,
	UNIQUE (node_id, seq)
);
CREATE INDEX audit_entries_sandbox ON audit_entries (sandbox_id, id) WHERE sandbox_id <> '';
CREATE TABLE usage_records (
	sandbox_id text PRIMARY KEY,
	node_id    text NOT NULL REFERENCES nodes (id),
	runtime    text NOT NULL,
	tags       jsonb NOT NULL DEFAULT '{}',
	started_at timestamptz NOT NULL,
	-- NULL while the sandbox lives: totals are then its node's last
	-- running figures.
	ended_at   timestamptz,
	totals     jsonb NOT NULL,
	shipped_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_records_ended ON usage_records (ended_at);
CREATE INDEX usage_records_node_ended ON usage_records (node_id, ended_at);`
