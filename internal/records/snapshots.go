package records

import (
	"context"
	"fmt"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

const snapshotColumns = `id, name, sandbox_id, spec, runtime, runtime_version, agent_protocol, agent_version, size_bytes, created_at, dir, env_sealed`

// PutSnapshot inserts the record of a new snapshot; a name already taken
// is ErrAlreadyExists.
func (s *Store) PutSnapshot(ctx context.Context, sn *sandbox.Snapshot) error {
	defer s.timed("put_snapshot")()
	spec, env, err := s.splitSpec(snapshotAD(sn.ID), sn.Spec)
	if err != nil {
		return fmt.Errorf("encoding spec of %s: %w", sn.ID, err)
	}
	var name any
	if sn.Name != "" {
		name = sn.Name
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO snapshots (`+snapshotColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sn.ID, name, sn.SandboxID, string(spec), sn.Runtime, sn.RuntimeVersion, sn.AgentProtocol, sn.AgentVersion,
		sn.SizeBytes, unixNano(sn.CreatedAt), sn.Dir, env)
	if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed") {
		return fmt.Errorf("%w: a snapshot named %q exists", errdefs.ErrAlreadyExists, sn.Name)
	}
	if err != nil {
		return fmt.Errorf("storing snapshot %s: %w", sn.ID, err)
	}
	return nil
}

// GetSnapshot returns the snapshot whose id or name is ref.
func (s *Store) GetSnapshot(ctx context.Context, ref string) (*sandbox.Snapshot, error) {
	defer s.timed("get_snapshot")()
	row := s.db.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE id = ? OR name = ?`, ref, ref)
	sn, err := s.scanSnapshot(row)
	if err != nil {
		return nil, notFound(err, "snapshot "+ref)
	}
	return sn, nil
}

// ListSnapshots returns every snapshot, oldest first.
func (s *Store) ListSnapshots(ctx context.Context) ([]*sandbox.Snapshot, error) {
	defer s.timed("list_snapshots")()
	rows, err := s.db.QueryContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots ORDER BY created_at`)
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	defer rows.Close()
	var out []*sandbox.Snapshot
	for rows.Next() {
		sn, err := s.scanSnapshot(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sn)
	}
	return out, rows.Err()
}

// DeleteSnapshot removes the record of id (not an error when absent).
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	defer s.timed("delete_snapshot")()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM snapshots WHERE id = ?`, id); err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	return nil
}

func (s *Store) scanSnapshot(r scanner) (*sandbox.Snapshot, error) {
	var (
		sn      sandbox.Snapshot
		name    *string
		spec    string
		env     string
		created int64
	)
	if err := r.Scan(&sn.ID, &name, &sn.SandboxID, &spec, &sn.Runtime, &sn.RuntimeVersion, &sn.AgentProtocol,
		&sn.AgentVersion, &sn.SizeBytes, &created, &sn.Dir, &env); err != nil {
		return nil, err
	}
	if name != nil {
		sn.Name = *name
	}
	if err := s.joinSpec(snapshotAD(sn.ID), spec, env, &sn.Spec); err != nil {
		return nil, fmt.Errorf("decoding spec of %s: %w", sn.ID, err)
	}
	sn.CreatedAt = fromNano(created)
	return &sn, nil
}
