package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// A placed sandbox's public record lives on its placements row (migration
// 7): the node's answer (apiv1.Sandbox JSON) at its create, replaced by
// the node's answers to calls through a control plane that change it
// (SetRecord), its state as its node's heartbeats last said it
// (HeartbeatLive), its tags and its creation time. Lists through a
// control plane read them here (ListSandboxes), never the nodes.

// record is what a row keeps of a sandbox's public record.
type record struct {
	raw       []byte // nil: none
	state     *string
	tags      map[string]string
	createdNS *int64
}

// readRecord reads the fields a row keeps apart from the node's record b
// (nil or empty: no record).
func readRecord(b []byte) (record, error) {
	r := record{tags: map[string]string{}}
	if len(b) == 0 {
		return r, nil
	}
	var v struct {
		State     string            `json:"state"`
		Tags      map[string]string `json:"tags"`
		CreatedAt time.Time         `json:"created_at"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return record{}, fmt.Errorf("the sandbox's record is not a sandbox's JSON: %w", err)
	}
	r.raw = b
	if v.State != "" {
		r.state = &v.State
	}
	if v.Tags != nil {
		r.tags = v.Tags
	}
	if !v.CreatedAt.IsZero() {
		ns := v.CreatedAt.UnixNano()
		r.createdNS = &ns
	}
	return r, nil
}

// SetRecord replaces sandbox id's public record with b, the node's answer
// to a call that changed it (a pause, a resume, an update of its tags or
// timeout); its creation time, and so its place in lists, stays.
func (s *Store) SetRecord(ctx context.Context, id string, b []byte) error {
	rec, err := readRecord(b)
	if err != nil || rec.raw == nil {
		return fmt.Errorf("recording sandbox %s's record: %w", id, err)
	}
	_, err = s.pool.Exec(ctx, `UPDATE placements SET record = $2, sandbox_state = $3, tags = $4
		WHERE id = $1 AND state IN ('placed', 'ending')`, id, rec.raw, rec.state, rec.tags)
	if err != nil {
		return fmt.Errorf("recording sandbox %s's record: %w", id, err)
	}
	return nil
}

// Live is a sandbox a node runs, and its state there ("": not said).
type Live struct {
	ID, State string
}

// stateSQL is one statement of a heartbeat: the placed sandboxes of node
// $1 among the live ones ($2 ids, $3 their states) whose recorded state
// differs take the node's; the others are not written.
const stateSQL = `UPDATE placements p SET sandbox_state = l.state
	FROM unnest($2::text[], $3::text[]) AS l (id, state)
	WHERE p.id = l.id AND p.node_id = $1 AND p.state = 'placed' AND l.state <> ''
		AND p.sandbox_state IS DISTINCT FROM l.state`

// updateStates runs stateSQL for node id's live sandboxes, in tx; none
// with a state said writes nothing.
func updateStates(ctx context.Context, tx pgx.Tx, id string, live []Live) error {
	ids, states := make([]string, 0, len(live)), make([]string, 0, len(live))
	for _, l := range live {
		if l.State != "" {
			ids, states = append(ids, l.ID), append(states, l.State)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, stateSQL, id, ids, states)
	return err
}

// StateLost is the state a list gives a sandbox whose node was lost.
const StateLost = "lost"

// listStateSQL is a row's state in a list: lost with its node; an ended
// one as its record last said if that was an end, else terminated; one
// being removed terminating; a placed one as its node last said.
const listStateSQL = `(CASE state WHEN 'lost' THEN 'lost'
	WHEN 'ended' THEN CASE WHEN sandbox_state IN ('terminated', 'failed') THEN sandbox_state ELSE 'terminated' END
	WHEN 'ending' THEN 'terminating'
	ELSE coalesce(sandbox_state, 'running') END)`

// placedStates are the list states only a placed row has.
var placedStates = []string{"creating", "running", "paused"}

// ListFilter selects a page of sandboxes (ListSandboxes).
type ListFilter struct {
	// States keeps sandboxes in any of these list states (listStateSQL);
	// empty keeps all.
	States []string
	// Tags keeps sandboxes with every one of these tags ("" as a value:
	// the key is present, whatever its value).
	Tags map[string]string
	// After continues after this position (zero: from the oldest).
	After Cursor
	Limit int
}

// Cursor is a position in a list's order: creation time in nanoseconds,
// then id (the order of a single daemon's list).
type Cursor struct {
	CreatedNS int64
	ID        string
}

// Listed is one sandbox of a list.
type Listed struct {
	ID, Name, State, Runtime   string
	CPUMilli, MemoryMB, DiskMB int64
	CreatedNS                  int64
	// Record is the node's JSON of the sandbox as last recorded; nil for
	// a sandbox bound without one.
	Record []byte
}

// ListSandboxes returns at most f.Limit sandboxes placed through a
// control plane that match f, oldest first, and the cursor to continue
// from (zero when nothing follows). The order and the cursor are a
// position (keyset), so sandboxes placed meanwhile come on later pages
// and none repeats; the filters are answered through placements_listed
// and the tags' GIN index.
func (s *Store) ListSandboxes(ctx context.Context, f ListFilter) ([]Listed, Cursor, error) {
	if f.Limit < 1 {
		return nil, Cursor{}, fmt.Errorf("listing sandboxes: limit %d", f.Limit)
	}
	q, args := listQuery(f)
	rows, err := s.pool.Query(ctx, q, args...)
	return scanListed(rows, err, f)
}

// listQuery is f's query (a page and one more row) and its arguments.
func listQuery(f ListFilter) (string, []any) {
	conds := []string{`created_ns IS NOT NULL`}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(f.States) > 0 {
		conds = append(conds, listStateSQL+` = ANY(`+arg(f.States)+`::text[])`)
		if !slices.ContainsFunc(f.States, func(s string) bool { return !slices.Contains(placedStates, s) }) {
			// Only placed rows can be in these: their index is walked.
			conds = append(conds, `state = 'placed'`)
		}
	}
	valued, keys := map[string]string{}, []string{}
	for k, v := range f.Tags {
		if v == "" {
			keys = append(keys, k)
		} else {
			valued[k] = v
		}
	}
	if len(valued) > 0 {
		conds = append(conds, `tags @> `+arg(valued)+`::jsonb`)
	}
	if len(keys) > 0 {
		conds = append(conds, `tags ?& `+arg(keys)+`::text[]`)
	}
	if f.After.ID != "" {
		conds = append(conds, `(created_ns, id) > (`+arg(f.After.CreatedNS)+`, `+arg(f.After.ID)+`)`)
	}
	q := `SELECT id, coalesce(name, ''), ` + listStateSQL + `, runtime, cpu_milli, memory_mb, disk_mb, created_ns, record
		FROM placements WHERE ` + strings.Join(conds, ` AND `) + ` ORDER BY created_ns, id LIMIT ` + arg(f.Limit+1)
	return q, args
}

// scanListed reads a list's rows, and the cursor after the page.
func scanListed(rows pgx.Rows, err error, f ListFilter) ([]Listed, Cursor, error) {
	if err != nil {
		return nil, Cursor{}, fmt.Errorf("listing sandboxes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Listed, error) {
		var l Listed
		err := r.Scan(&l.ID, &l.Name, &l.State, &l.Runtime, &l.CPUMilli, &l.MemoryMB, &l.DiskMB, &l.CreatedNS, &l.Record)
		return l, err
	})
	if err != nil {
		return nil, Cursor{}, fmt.Errorf("listing sandboxes: %w", err)
	}
	var next Cursor
	if len(out) > f.Limit {
		out = out[:f.Limit]
		last := out[len(out)-1]
		next = Cursor{CreatedNS: last.CreatedNS, ID: last.ID}
	}
	return out, next, nil
}
