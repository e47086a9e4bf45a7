package store

// auditUsageSchema is migration 9: each node's audit trail and usage
// records, as the node ships them (audit.go, usage.go).
const auditUsageSchema = `CREATE TABLE audit_entries (
	-- (txid, id) is the order the cluster received entries in: the
	-- shipment's transaction, then the order within it. A page continues
	-- after a (txid, id), and shows only transactions older than every
	-- one still running (audit.go), so none lands behind a page later.
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	txid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
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
CREATE INDEX audit_entries_received ON audit_entries (txid, id);
CREATE INDEX audit_entries_sandbox ON audit_entries (sandbox_id, txid, id) WHERE sandbox_id <> '';
-- A sandbox moved between nodes (a drain) has a record on each.
CREATE TABLE usage_records (
	node_id    text NOT NULL REFERENCES nodes (id),
	sandbox_id text NOT NULL,
	runtime    text NOT NULL,
	tags       jsonb NOT NULL DEFAULT '{}',
	started_at timestamptz NOT NULL,
	-- NULL while the sandbox lives: totals are then its node's last
	-- running figures.
	ended_at   timestamptz,
	totals     jsonb NOT NULL,
	shipped_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (node_id, sandbox_id)
);
CREATE INDEX usage_records_ended ON usage_records (ended_at);
CREATE INDEX usage_records_node_ended ON usage_records (node_id, ended_at);`
