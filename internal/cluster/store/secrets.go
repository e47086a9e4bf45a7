package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/internal/errdefs"
	"corral/internal/seal"
)

// The cluster's secrets (cluster_secrets): names and keys in the clear,
// for listing; the values sealed (seal, AES-256-GCM) with the key the
// caller passes, which control planes and nodes derive from the join
// token (nodeauth.SecretKey), and bound to the secret's name (a sealed
// value copied to another row does not open). The database alone opens
// nothing. No method returns a value except SecretValues, which a node
// calls to inject a secret into a sandbox it creates; no error carries a
// value.

func secretAD(name string) []byte { return []byte("corral/cluster-secret/" + name) }

// SecretInfo is what may be shown of a secret: never a value.
type SecretInfo struct {
	Name      string
	Keys      []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func sealSecret(k *seal.Key, name string, values map[string]string) (string, error) {
	b, err := json.Marshal(values)
	if err != nil {
		return "", err
	}
	return k.SealString(b, secretAD(name)), nil
}

// CreateSecret stores a new secret (keys are values' keys, sorted); one
// of that name is ErrAlreadyExists.
func (s *Store) CreateSecret(ctx context.Context, k *seal.Key, name string, keys []string, values map[string]string) (SecretInfo, error) {
	sealed, err := sealSecret(k, name, values)
	if err != nil {
		return SecretInfo{}, fmt.Errorf("sealing secret %s: %w", name, err)
	}
	var info SecretInfo
	err = s.pool.QueryRow(ctx, `INSERT INTO cluster_secrets (name, keys, sealed) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO NOTHING RETURNING `+secretColumns, name, keys, sealed).Scan(&info.Name, &info.Keys, &info.CreatedAt, &info.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return SecretInfo{}, fmt.Errorf("%w: secret %s", errdefs.ErrAlreadyExists, name)
	}
	if err != nil {
		return SecretInfo{}, fmt.Errorf("storing secret %s: %w", name, err)
	}
	return info, nil
}

// RotateSecret replaces the values (and keys) of an existing secret.
func (s *Store) RotateSecret(ctx context.Context, k *seal.Key, name string, keys []string, values map[string]string) (SecretInfo, error) {
	sealed, err := sealSecret(k, name, values)
	if err != nil {
		return SecretInfo{}, fmt.Errorf("sealing secret %s: %w", name, err)
	}
	var info SecretInfo
	err = s.pool.QueryRow(ctx, `UPDATE cluster_secrets SET keys = $2, sealed = $3, updated_at = now() WHERE name = $1
		RETURNING `+secretColumns, name, keys, sealed).Scan(&info.Name, &info.Keys, &info.CreatedAt, &info.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return SecretInfo{}, fmt.Errorf("%w: secret %s", errdefs.ErrNotFound, name)
	}
	if err != nil {
		return SecretInfo{}, fmt.Errorf("rotating secret %s: %w", name, err)
	}
	return info, nil
}

// DeleteSecret removes a secret.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM cluster_secrets WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("removing secret %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: secret %s", errdefs.ErrNotFound, name)
	}
	return nil
}

const secretColumns = `name, keys, created_at, updated_at`

func scanSecret(row pgx.CollectableRow) (SecretInfo, error) {
	var info SecretInfo
	err := row.Scan(&info.Name, &info.Keys, &info.CreatedAt, &info.UpdatedAt)
	return info, err
}

// SecretInfo returns a secret's name and keys.
func (s *Store) SecretInfo(ctx context.Context, name string) (SecretInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+secretColumns+` FROM cluster_secrets WHERE name = $1`, name)
	if err != nil {
		return SecretInfo{}, fmt.Errorf("reading secret %s: %w", name, err)
	}
	info, err := pgx.CollectExactlyOneRow(rows, scanSecret)
	if errors.Is(err, pgx.ErrNoRows) {
		return SecretInfo{}, fmt.Errorf("%w: secret %s", errdefs.ErrNotFound, name)
	}
	if err != nil {
		return SecretInfo{}, fmt.Errorf("reading secret %s: %w", name, err)
	}
	return info, nil
}

// ListSecrets lists every secret's name and keys, by name.
func (s *Store) ListSecrets(ctx context.Context) ([]SecretInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+secretColumns+` FROM cluster_secrets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanSecret)
	if err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	return out, nil
}

// SecretValues opens a secret's values with k. A value sealed with
// another key (another join token) is failed_precondition; the error
// never carries a value.
func (s *Store) SecretValues(ctx context.Context, k *seal.Key, name string) (map[string]string, error) {
	var sealed string
	err := s.pool.QueryRow(ctx, `SELECT sealed FROM cluster_secrets WHERE name = $1`, name).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: secret %s", errdefs.ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading secret %s: %w", name, err)
	}
	b, err := k.OpenString(sealed, secretAD(name))
	if errors.Is(err, seal.ErrWrongKey) {
		return nil, fmt.Errorf("%w: secret %s was sealed with a key derived from another join token", errdefs.ErrFailedPrecondition, name)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: secret %s does not open", errdefs.ErrFailedPrecondition, name)
	}
	var values map[string]string
	if err := json.Unmarshal(b, &values); err != nil {
		return nil, fmt.Errorf("%w: secret %s is not a JSON object", errdefs.ErrFailedPrecondition, name)
	}
	return values, nil
}
