package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Process is the record of one process started in a sandbox.
type Process struct {
	SandboxID string
	PID       int
	Tag       string
	Args      []string
	StartedAt time.Time
	EndedAt   time.Time
	ExitCode  *int
}

// PutProcessStart records a started process.
func (s *Store) PutProcessStart(ctx context.Context, p Process) error {
	args, err := json.Marshal(p.Args)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT OR REPLACE INTO processes (sandbox_id, pid, tag, args, started_at) VALUES (?, ?, ?, ?, ?)`,
		p.SandboxID, p.PID, p.Tag, string(args), p.StartedAt.UnixNano())
	if err != nil {
		return fmt.Errorf("recording process %d of %s: %w", p.PID, p.SandboxID, err)
	}
	return nil
}

// PutProcessEnd records the exit of the latest process pid of a sandbox.
func (s *Store) PutProcessEnd(ctx context.Context, sandboxID string, pid, exitCode int, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE processes SET ended_at = ?, exit_code = ?
		WHERE sandbox_id = ? AND pid = ? AND ended_at = 0`, at.UnixNano(), exitCode, sandboxID, pid)
	if err != nil {
		return fmt.Errorf("recording exit of process %d of %s: %w", pid, sandboxID, err)
	}
	return nil
}

// Processes returns the process records of a sandbox, oldest first.
func (s *Store) Processes(ctx context.Context, sandboxID string) ([]Process, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT pid, tag, args, started_at, ended_at, exit_code FROM processes
		WHERE sandbox_id = ? ORDER BY started_at`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("reading processes of %s: %w", sandboxID, err)
	}
	defer rows.Close()
	var out []Process
	for rows.Next() {
		p := Process{SandboxID: sandboxID}
		var args string
		var started, ended int64
		var exit *int
		if err := rows.Scan(&p.PID, &p.Tag, &args, &started, &ended, &exit); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(args), &p.Args); err != nil {
			return nil, err
		}
		p.StartedAt, p.EndedAt, p.ExitCode = fromNano(started), fromNano(ended), exit
		out = append(out, p)
	}
	return out, rows.Err()
}
