package records

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// SandboxFilter selects a page of sandbox records (ListSandboxPage).
type SandboxFilter struct {
	// States keeps records in any of these states; empty keeps all.
	States []sandbox.State
	// Tags keeps records that have every one of these tags: a key with a
	// value must have that value, a key with "" must merely be present.
	// Keys must be valid tag keys (sandbox.ValidTagKey).
	Tags map[string]string
	// HideLiveTag leaves out records that are not terminal and carry this
	// tag (the manager's warm pool sandboxes); empty hides nothing.
	HideLiveTag string
	// After continues a listing after the record a Cursor names; zero
	// starts at the oldest.
	After Cursor
	// Limit bounds the page (at least 1).
	Limit int
	// Desc lists newest first (After then continues toward the oldest).
	Desc bool
	// StartedAfter, when set, keeps records started (or, not started yet,
	// created) at or after it.
	StartedAfter time.Time
	// Origin, when set, keeps records whose origin is this: the value of
	// tag OriginTag when they carry it, else the memory snapshot they
	// were restored from, else their image (E2B's template of a sandbox).
	Origin    string
	OriginTag string
}

// Cursor is a position in the order of ListSandboxPage (creation time,
// then id): the last record of a page. A listing continued from it is
// stable: records created meanwhile come at the end, removed ones leave no
// hole or repeat.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// String encodes the cursor as an opaque token.
func (c Cursor) String() string {
	if c.ID == "" {
		return ""
	}
	raw := strconv.FormatInt(c.CreatedAt.UnixNano(), 10) + "/" + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseCursor decodes a token made by Cursor.String; "" is the start.
// A malformed token is ErrInvalidArgument naming field.
func ParseCursor(field, token string) (Cursor, error) {
	if token == "" {
		return Cursor{}, nil
	}
	bad := errdefs.Invalid(field, "not a listing cursor (pass back the next token of the previous page)")
	if len(token) > 128 {
		return Cursor{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return Cursor{}, bad
	}
	ns, id, ok := strings.Cut(string(raw), "/")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || n <= 0 || id == "" {
		return Cursor{}, bad
	}
	return Cursor{CreatedAt: time.Unix(0, n).UTC(), ID: id}, nil
}

// ListSandboxPage returns at most f.Limit records matching f, oldest
// first, and the cursor to continue from (zero when nothing follows).
func (s *Store) ListSandboxPage(ctx context.Context, f SandboxFilter) ([]*sandbox.Sandbox, Cursor, error) {
	defer s.timed("list_sandbox_page")()
	if f.Limit < 1 {
		return nil, Cursor{}, errdefs.Invalid("limit", "must be at least 1")
	}
	where, args, err := f.where()
	if err != nil {
		return nil, Cursor{}, err
	}
	order := ` ORDER BY created_at, id LIMIT ?`
	if f.Desc {
		order = ` ORDER BY created_at DESC, id DESC LIMIT ?`
	}
	q := `SELECT ` + sandboxColumns + ` FROM sandboxes` + where + order
	rows, err := s.db.QueryContext(ctx, q, append(args, f.Limit+1)...)
	if err != nil {
		return nil, Cursor{}, fmt.Errorf("listing sandboxes: %w", err)
	}
	defer rows.Close()
	var out []*sandbox.Sandbox
	for rows.Next() {
		sb, err := s.scanSandbox(rows)
		if err != nil {
			return nil, Cursor{}, err
		}
		out = append(out, sb)
	}
	if err := rows.Err(); err != nil {
		return nil, Cursor{}, fmt.Errorf("listing sandboxes: %w", err)
	}
	var next Cursor
	if len(out) > f.Limit {
		out = out[:f.Limit]
		last := out[len(out)-1]
		next = Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return out, next, nil
}

// where is the filter's WHERE clause and its arguments.
func (f SandboxFilter) where() (string, []any, error) {
	var conds []string
	var args []any
	if len(f.States) > 0 {
		conds = append(conds, `state IN (?`+strings.Repeat(`, ?`, len(f.States)-1)+`)`)
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	for k, v := range f.Tags {
		path, err := tagPath(k)
		if err != nil {
			return "", nil, err
		}
		if v == "" {
			conds = append(conds, `json_type(spec, ?) IS NOT NULL`)
			args = append(args, path)
		} else {
			conds = append(conds, `json_extract(spec, ?) = ?`)
			args = append(args, path, v)
		}
	}
	if f.HideLiveTag != "" {
		path, err := tagPath(f.HideLiveTag)
		if err != nil {
			return "", nil, err
		}
		conds = append(conds, `(state IN ('terminated', 'failed') OR json_type(spec, ?) IS NULL)`)
		args = append(args, path)
	}
	if f.After.ID != "" {
		cmp := `>`
		if f.Desc {
			cmp = `<`
		}
		conds = append(conds, `(created_at, id) `+cmp+` (?, ?)`)
		args = append(args, f.After.CreatedAt.UnixNano(), f.After.ID)
	}
	if !f.StartedAfter.IsZero() {
		conds = append(conds, `(CASE WHEN started_at > 0 THEN started_at ELSE created_at END) >= ?`)
		args = append(args, f.StartedAfter.UnixNano())
	}
	if f.Origin != "" {
		path, err := tagPath(f.OriginTag)
		if err != nil {
			return "", nil, err
		}
		conds = append(conds, `COALESCE(json_extract(spec, ?), NULLIF(json_extract(spec, '$.from_snapshot'), ''), json_extract(spec, '$.image')) = ?`)
		args = append(args, path, f.Origin)
	}
	if len(conds) == 0 {
		return "", nil, nil
	}
	return ` WHERE ` + strings.Join(conds, ` AND `), args, nil
}

// tagPath is the JSON path of tag k in a record's spec; k is checked, as
// it is spliced into the path (a valid key holds no quote).
func tagPath(k string) (string, error) {
	if !sandbox.ValidTagKey(k) {
		return "", errdefs.Invalid("tag", "bad tag key %q", k)
	}
	return `$.tags."` + k + `"`, nil
}

// SandboxIDByName returns the id of the newest record named name.
func (s *Store) SandboxIDByName(ctx context.Context, name string) (string, error) {
	defer s.timed("sandbox_by_name")()
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT id FROM sandboxes WHERE name = ? ORDER BY created_at DESC LIMIT 1`, name).Scan(&id)
	if err == sql.ErrNoRows {
		return "", fmt.Errorf("%w: no sandbox named %q", errdefs.ErrNotFound, name)
	}
	if err != nil {
		return "", fmt.Errorf("finding sandbox %q: %w", name, err)
	}
	return id, nil
}
