package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"corral/internal/errdefs"
	"corral/internal/seal"
)

// Secrets are stored with their keys in the clear (for listing) and their
// values sealed with a subkey of the daemon's key for this purpose alone
// (secretKeyLabel), bound to the secret's name: a sealed value copied to
// another row does not open. No method returns a value except
// SecretValues, which the manager uses to inject them.

const secretKeyLabel = "secret-values"

func secretAD(name string) []byte { return []byte("corral/secret/" + name) }

// SecretInfo is what may be shown of a secret: never a value.
type SecretInfo struct {
	Name      string
	Keys      []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (s *Store) secretKey() (*seal.Key, error) {
	return seal.New(s.key.Derive(secretKeyLabel))
}

// sealSecret seals values for the row of name.
func (s *Store) sealSecret(name string, values map[string]string) (string, error) {
	k, err := s.secretKey()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(values)
	if err != nil {
		return "", err
	}
	return k.SealString(b, secretAD(name)), nil
}

// CreateSecret stores a new secret; one of that name already there is
// ErrAlreadyExists.
func (s *Store) CreateSecret(ctx context.Context, name string, keys []string, values map[string]string) (SecretInfo, error) {
	sealed, err := s.sealSecret(name, values)
	if err != nil {
		return SecretInfo{}, fmt.Errorf("sealing secret %s: %w", name, err)
	}
	kj, _ := json.Marshal(keys)
	now := time.Now().UTC()
	res, err := s.db.ExecContext(ctx, `INSERT INTO secrets (name, keys, sealed, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, name, string(kj), sealed, now.UnixNano(), now.UnixNano())
	if err != nil {
		return SecretInfo{}, fmt.Errorf("storing secret %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return SecretInfo{}, fmt.Errorf("%w: secret %s", errdefs.ErrAlreadyExists, name)
	}
	return SecretInfo{Name: name, Keys: keys, CreatedAt: now, UpdatedAt: now}, nil
}

// RotateSecret replaces the values (and keys) of an existing secret.
func (s *Store) RotateSecret(ctx context.Context, name string, keys []string, values map[string]string) (SecretInfo, error) {
	sealed, err := s.sealSecret(name, values)
	if err != nil {
		return SecretInfo{}, fmt.Errorf("sealing secret %s: %w", name, err)
	}
	kj, _ := json.Marshal(keys)
	now := time.Now().UTC()
	res, err := s.db.ExecContext(ctx, `UPDATE secrets SET keys = ?, sealed = ?, updated_at = ? WHERE name = ?`,
		string(kj), sealed, now.UnixNano(), name)
	if err != nil {
		return SecretInfo{}, fmt.Errorf("rotating secret %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return SecretInfo{}, fmt.Errorf("%w: secret %s", errdefs.ErrNotFound, name)
	}
	return s.SecretInfo(ctx, name)
}

// DeleteSecret removes a secret. Its bytes are overwritten (the store runs
// with secure_delete).
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("removing secret %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: secret %s", errdefs.ErrNotFound, name)
	}
	return nil
}

// SecretInfo returns a secret's name and keys.
func (s *Store) SecretInfo(ctx context.Context, name string) (SecretInfo, error) {
	row := s.db.QueryRowContext(ctx, `SELECT name, keys, created_at, updated_at FROM secrets WHERE name = ?`, name)
	info, err := scanSecretInfo(row)
	if err != nil {
		return SecretInfo{}, notFound(err, "secret "+name)
	}
	return info, nil
}

// ListSecrets lists every secret's name and keys, by name.
func (s *Store) ListSecrets(ctx context.Context) ([]SecretInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, keys, created_at, updated_at FROM secrets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	defer rows.Close()
	out := []SecretInfo{}
	for rows.Next() {
		info, err := scanSecretInfo(rows)
		if err != nil {
			return nil, fmt.Errorf("listing secrets: %w", err)
		}
		out = append(out, info)
	}
	return out, rows.Err()
}

func scanSecretInfo(row interface{ Scan(...any) error }) (SecretInfo, error) {
	var info SecretInfo
	var keys string
	var created, updated int64
	if err := row.Scan(&info.Name, &keys, &created, &updated); err != nil {
		return info, err
	}
	if err := json.Unmarshal([]byte(keys), &info.Keys); err != nil {
		return info, fmt.Errorf("secret %s: its keys: %w", info.Name, err)
	}
	info.CreatedAt, info.UpdatedAt = fromNano(created), fromNano(updated)
	return info, nil
}

// SecretValues opens a secret's values. A value sealed with another key
// is failed_precondition; the error never carries a value.
func (s *Store) SecretValues(ctx context.Context, name string) (map[string]string, error) {
	var sealed string
	err := s.db.QueryRowContext(ctx, `SELECT sealed FROM secrets WHERE name = ?`, name).Scan(&sealed)
	if err != nil {
		return nil, notFound(err, "secret "+name)
	}
	k, err := s.secretKey()
	if err != nil {
		return nil, err
	}
	b, err := k.OpenString(sealed, secretAD(name))
	if errors.Is(err, seal.ErrWrongKey) {
		return nil, fmt.Errorf("%w: secret %s was sealed with another key than this state directory's", errdefs.ErrFailedPrecondition, name)
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
