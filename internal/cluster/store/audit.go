package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Each node ships its audit trail here (package node's shipper): every
// entry exactly as the node hashed it, so that a control plane verifies
// each node's chain from this table alone, with package audit's verifier.
// A node's entries are unique by (node, seq): shipping one again changes
// nothing.

// AuditEntry is one entry of a node's trail as stored here.
type AuditEntry struct {
	// At is the entry's position in the order the cluster received
	// entries in; zero in what a node ships.
	At        AuditPos
	Node      string
	Seq       int64
	Time      time.Time
	Kind      string
	SandboxID string
	Caller    string
	Fields    map[string]string
	PrevHash  string
	Hash      string
}

// AuditFilter selects entries of the cluster's trail, in the order they
// were received, or with Node one node's in seq order.
type AuditFilter struct {
	Node      string
	SandboxID string
	Kinds     []string
	Since     time.Time
	// After continues after this position (the zero position starts at
	// the oldest); with Node, AfterSeq continues after that seq.
	After    AuditPos
	AfterSeq int64
	Limit    int
}

// AuditPos is a position in the order the cluster received entries in:
// the shipment's transaction id, then the entry's id. A page shows only
// the entries of transactions older than every transaction still
// running, so an entry never lands before a position already given out:
// a page continued later misses nothing shipped meanwhile (an entry
// shows once the shipments begun before it have ended).
type AuditPos struct {
	Tx int64
	ID int64
}

// MaxAuditPage bounds one page of QueryAudit and one shipment.
const MaxAuditPage = 1000

// ShipAudit stores node's entries (in seq order, at most MaxAuditPage);
// entries the node shipped before are left as they are.
func (s *Store) ShipAudit(ctx context.Context, node string, es []AuditEntry) error {
	if len(es) == 0 {
		return nil
	}
	if len(es) > MaxAuditPage {
		return fmt.Errorf("shipping %d audit entries: at most %d at once", len(es), MaxAuditPage)
	}
	n := len(es)
	seqs, times := make([]int64, n), make([]int64, n)
	kinds, sbs, callers, fields, prevs, hashes := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, e := range es {
		// No fields are JSON null, as the node hashed them (not {}).
		f, err := json.Marshal(e.Fields)
		if err != nil {
			return fmt.Errorf("shipping audit entry %d: %w", e.Seq, err)
		}
		seqs[i], times[i], kinds[i], sbs[i], callers[i], fields[i], prevs[i], hashes[i] =
			e.Seq, e.Time.UnixNano(), e.Kind, e.SandboxID, e.Caller, string(f), e.PrevHash, e.Hash
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO audit_entries (node_id, seq, time_ns, kind, sandbox_id, caller, fields, prev_hash, hash)
		SELECT $1, u.seq, u.t, u.kind, u.sb, u.caller, u.fields::jsonb, u.prev, u.hash
		FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
			WITH ORDINALITY AS u(seq, t, kind, sb, caller, fields, prev, hash, ord)
		ORDER BY u.ord
		ON CONFLICT (node_id, seq) DO NOTHING`, node, seqs, times, kinds, sbs, callers, fields, prevs, hashes)
	if err != nil {
		return fmt.Errorf("shipping %d audit entries of node %s: %w", n, node, err)
	}
	return nil
}

// AuditHead is node's newest shipped entry's seq and hash (0 and "" when
// it shipped none).
func (s *Store) AuditHead(ctx context.Context, node string) (int64, string, error) {
	var seq int64
	var hash string
	err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM audit_entries WHERE node_id = $1 ORDER BY seq DESC LIMIT 1`, node).Scan(&seq, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("reading node %s's shipped audit trail: %w", node, err)
	}
	return seq, hash, nil
}

const auditColumns = `txid::text::bigint, id, node_id, seq, time_ns, kind, sandbox_id, caller, fields::text, prev_hash, hash`

// QueryAudit returns the entries f selects, in the order received.
func (s *Store) QueryAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	var where []string
	var args []any
	arg := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	order := "txid, id"
	if f.Node != "" {
		order = "seq"
		arg("node_id = ?", f.Node)
		arg("seq > ?", f.AfterSeq)
	} else {
		args = append(args, f.After.Tx, f.After.ID)
		where = append(where, "(txid, id) > ($1::bigint::text::xid8, $2)", "txid < pg_snapshot_xmin(pg_current_snapshot())")
	}
	if f.SandboxID != "" {
		arg("sandbox_id = ?", f.SandboxID)
	}
	if len(f.Kinds) > 0 {
		arg("kind = ANY(?)", f.Kinds)
	}
	if !f.Since.IsZero() {
		arg("time_ns >= ?", f.Since.UnixNano())
	}
	args = append(args, min(max(f.Limit, 1), MaxAuditPage))
	q := `SELECT ` + auditColumns + ` FROM audit_entries WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY ` + order + ` LIMIT $` + strconv.Itoa(len(args))
	return s.readAudit(ctx, q, args...)
}

// AuditNodes names the nodes that shipped audit entries, by id.
func (s *Store) AuditNodes(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM nodes n WHERE EXISTS (SELECT 1 FROM audit_entries a WHERE a.node_id = n.id) ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("listing the nodes' audit trails: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing the nodes' audit trails: %w", err)
	}
	return ids, nil
}

// WalkAudit calls fn with each of node's entries in seq order, a page at
// a time; it stops at fn's first error.
func (s *Store) WalkAudit(ctx context.Context, node string, fn func(AuditEntry) error) error {
	f := AuditFilter{Node: node, AfterSeq: -1 << 62, Limit: MaxAuditPage}
	for {
		page, err := s.QueryAudit(ctx, f)
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return err
			}
			f.AfterSeq = e.Seq
		}
		if len(page) < MaxAuditPage {
			return nil
		}
	}
}

func (s *Store) readAudit(ctx context.Context, q string, args ...any) ([]AuditEntry, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's audit trail: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var ns int64
		var fields string
		if err := rows.Scan(&e.At.Tx, &e.At.ID, &e.Node, &e.Seq, &ns, &e.Kind, &e.SandboxID, &e.Caller, &fields, &e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("reading the cluster's audit trail: %w", err)
		}
		e.Time = time.Unix(0, ns).UTC()
		// Fields that are not a map of strings were edited: keep the
		// text as one field, so verify reports the entry.
		if err := json.Unmarshal([]byte(fields), &e.Fields); err != nil {
			e.Fields = map[string]string{"unparsable": fields}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
