package records

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// AuditEntry is one row of the audit trail as stored. Package audit owns
// its meaning (the hash chain); this package only keeps rows in seq order.
type AuditEntry struct {
	Seq       int64             `json:"seq"`
	Time      time.Time         `json:"time"`
	Kind      string            `json:"kind"`
	SandboxID string            `json:"sandbox_id,omitempty"`
	Caller    string            `json:"caller,omitempty"`
	Fields    map[string]string `json:"fields,omitempty"`
	PrevHash  string            `json:"prev_hash"`
	Hash      string            `json:"hash"`
}

// AuditFilter selects entries of the trail, oldest first.
type AuditFilter struct {
	SandboxID string
	Kinds     []string
	Since     time.Time
	// After continues after this seq; zero starts at the oldest.
	After int64
	Limit int
}

// AppendAudit inserts entries in one transaction.
func (s *Store) AppendAudit(ctx context.Context, entries []AuditEntry) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("appending to the audit trail: %w", err)
	}
	defer tx.Rollback()
	for _, e := range entries {
		fields, err := json.Marshal(e.Fields)
		if err != nil {
			return fmt.Errorf("encoding audit entry %d: %w", e.Seq, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit (seq, time, kind, sandbox_id, caller, fields, prev_hash, hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, e.Seq, e.Time.UnixNano(), e.Kind, e.SandboxID, e.Caller, string(fields), e.PrevHash, e.Hash); err != nil {
			return fmt.Errorf("appending audit entry %d: %w", e.Seq, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("appending to the audit trail: %w", err)
	}
	return nil
}

// LastAudit returns the newest entry of the trail; ok is false when the
// trail is empty.
func (s *Store) LastAudit(ctx context.Context) (e AuditEntry, ok bool, err error) {
	rows, err := s.QueryAudit(ctx, AuditFilter{After: -1, Limit: 1}, true)
	if err != nil || len(rows) == 0 {
		return AuditEntry{}, false, err
	}
	return rows[0], true, nil
}

// QueryAudit returns the entries f selects, in seq order (newest first
// when desc).
func (s *Store) QueryAudit(ctx context.Context, f AuditFilter, desc bool) ([]AuditEntry, error) {
	var where []string
	var args []any
	if f.SandboxID != "" {
		where, args = append(where, "sandbox_id = ?"), append(args, f.SandboxID)
	}
	if len(f.Kinds) > 0 {
		where = append(where, "kind IN (?"+strings.Repeat(", ?", len(f.Kinds)-1)+")")
		for _, k := range f.Kinds {
			args = append(args, k)
		}
	}
	if !f.Since.IsZero() {
		where, args = append(where, "time >= ?"), append(args, f.Since.UnixNano())
	}
	if f.After > 0 {
		where, args = append(where, "seq > ?"), append(args, f.After)
	}
	q := `SELECT seq, time, kind, sandbox_id, caller, fields, prev_hash, hash FROM audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	order := " ORDER BY seq"
	if desc {
		order += " DESC"
	}
	q += order + " LIMIT ?"
	args = append(args, max(f.Limit, 1))
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the audit trail: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var t int64
		var fields string
		if err := rows.Scan(&e.Seq, &t, &e.Kind, &e.SandboxID, &e.Caller, &fields, &e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("reading the audit trail: %w", err)
		}
		e.Time = time.Unix(0, t).UTC()
		// A row whose fields no longer parse was edited: keep it, with
		// the text as one field, so that verify reports it rather than a
		// read error hiding the rest of the trail.
		if err := json.Unmarshal([]byte(fields), &e.Fields); err != nil {
			e.Fields = map[string]string{"unparsable": fields}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// PruneAudit deletes the entries up to and including seq through and
// appends checkpoint (the entry recording the prune), in one transaction,
// so the trail left always chains to a checkpoint. It returns how many
// entries went.
func (s *Store) PruneAudit(ctx context.Context, through int64, checkpoint AuditEntry) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("pruning the audit trail: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM audit WHERE seq <= ?`, through)
	if err != nil {
		return 0, fmt.Errorf("pruning the audit trail: %w", err)
	}
	n, _ := res.RowsAffected()
	fields, err := json.Marshal(checkpoint.Fields)
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit (seq, time, kind, sandbox_id, caller, fields, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, checkpoint.Seq, checkpoint.Time.UnixNano(), checkpoint.Kind, checkpoint.SandboxID,
		checkpoint.Caller, string(fields), checkpoint.PrevHash, checkpoint.Hash); err != nil {
		return 0, fmt.Errorf("appending the audit checkpoint: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("pruning the audit trail: %w", err)
	}
	return n, nil
}

// AuditSeqBefore returns the seq of the newest entry older than t; zero
// when there is none.
func (s *Store) AuditSeqBefore(ctx context.Context, t time.Time) (int64, error) {
	var seq sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT MAX(seq) FROM audit WHERE time < ?`, t.UnixNano()).Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("reading the audit trail: %w", err)
	}
	return seq.Int64, nil
}
