package records

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"corral/internal/sandbox"
)

const sandboxColumns = `id, state, spec, created_at, started_at, ended_at, exit_code, end_reason, error, agent_version, dir, runtime_info, paused_at, paused_for, env_sealed, lifetime, pause_kind, fs_image`

// PutSandbox inserts or replaces the record of sb and appends events to
// its event log, in one transaction (one synced write).
func (s *Store) PutSandbox(ctx context.Context, sb *sandbox.Sandbox, events ...Event) error {
	defer s.timed("put_sandbox")()
	args, err := s.sandboxArgs(sb)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		if _, err := s.db.ExecContext(ctx, putSandboxSQL, args...); err != nil {
			return fmt.Errorf("storing sandbox %s: %w", sb.ID, err)
		}
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storing sandbox %s: %w", sb.ID, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, putSandboxSQL, args...); err != nil {
		return fmt.Errorf("storing sandbox %s: %w", sb.ID, err)
	}
	for _, ev := range events {
		ev.SandboxID = sb.ID
		if err := appendEvent(ctx, tx, ev); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("storing sandbox %s: %w", sb.ID, err)
	}
	return nil
}

const putSandboxSQL = `INSERT OR REPLACE INTO sandboxes (name, ` + sandboxColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// sandboxArgs are the values of putSandboxSQL for sb: its spec without
// the env, which is sealed apart.
func (s *Store) sandboxArgs(sb *sandbox.Sandbox) ([]any, error) {
	spec, env, err := s.splitSpec(sandboxAD(sb.ID), sb.Spec)
	if err != nil {
		return nil, fmt.Errorf("encoding spec of %s: %w", sb.ID, err)
	}
	var exit sql.NullInt64
	if sb.ExitCode != nil {
		exit = sql.NullInt64{Int64: int64(*sb.ExitCode), Valid: true}
	}
	info, err := json.Marshal(sb.RuntimeInfo)
	if err != nil || sb.RuntimeInfo == nil {
		info = []byte("{}")
	}
	return []any{sb.Spec.Name, sb.ID, string(sb.State), string(spec), unixNano(sb.CreatedAt), unixNano(sb.StartedAt),
		unixNano(sb.EndedAt), exit, sb.EndReason, sb.Error, sb.AgentVersion, sb.Dir, string(info),
		unixNano(sb.PausedAt), int64(sb.PausedFor), env, int64(sb.Lifetime), sb.PauseKind, sb.FSImage}, nil
}

// GetSandbox returns the record of id.
func (s *Store) GetSandbox(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	defer s.timed("get_sandbox")()
	row := s.db.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id)
	sb, err := s.scanSandbox(row)
	if err != nil {
		return nil, notFound(err, "sandbox "+id)
	}
	return sb, nil
}

// ListSandboxes returns every record, oldest first. With live set, only
// sandboxes that are not terminal.
func (s *Store) ListSandboxes(ctx context.Context, live bool) ([]*sandbox.Sandbox, error) {
	defer s.timed("list_sandboxes")()
	q := `SELECT ` + sandboxColumns + ` FROM sandboxes`
	if live {
		q += ` WHERE state NOT IN ('terminated', 'failed')`
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at`)
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	defer rows.Close()
	var out []*sandbox.Sandbox
	for rows.Next() {
		sb, err := s.scanSandbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	return out, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

func (s *Store) scanSandbox(r scanner) (*sandbox.Sandbox, error) {
	var (
		sb                      sandbox.Sandbox
		state, spec, env        string
		created, started, ended int64
		exit                    sql.NullInt64
		info                    string
		pausedAt, pausedFor     int64
		lifetime                int64
	)
	if err := r.Scan(&sb.ID, &state, &spec, &created, &started, &ended, &exit,
		&sb.EndReason, &sb.Error, &sb.AgentVersion, &sb.Dir, &info, &pausedAt, &pausedFor, &env, &lifetime, &sb.PauseKind, &sb.FSImage); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(info), &sb.RuntimeInfo); err != nil || len(sb.RuntimeInfo) == 0 {
		sb.RuntimeInfo = nil
	}
	if err := s.joinSpec(sandboxAD(sb.ID), spec, env, &sb.Spec); err != nil {
		return nil, fmt.Errorf("decoding spec of %s: %w", sb.ID, err)
	}
	sb.State = sandbox.State(state)
	sb.CreatedAt, sb.StartedAt, sb.EndedAt = fromNano(created), fromNano(started), fromNano(ended)
	sb.PausedAt, sb.PausedFor = fromNano(pausedAt), time.Duration(pausedFor)
	sb.Lifetime = time.Duration(lifetime)
	if exit.Valid {
		code := int(exit.Int64)
		sb.ExitCode = &code
	}
	return &sb, nil
}
