package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
	"corral/internal/seal"
)

// A spec's env (API keys, passwords) is never stored in the clear: the
// spec column holds the spec without it, and env_sealed the env's JSON
// sealed with the daemon's key, bound to the row (its kind and id as the
// associated data), or '' when the env is empty.
// The values of the spec's secrets (SecretEnv) are sealed with the env,
// under a key no variable can have (secretEnvKey).

func sandboxAD(id string) []byte  { return []byte("corral/sandbox/" + id + "/env") }
func snapshotAD(id string) []byte { return []byte("corral/snapshot/" + id + "/env") }

// splitSpec encodes spec for its columns: the spec without its env, and
// the env sealed.
func (s *Store) splitSpec(ad []byte, spec sandbox.Spec) (string, string, error) {
	env, err := withSecretEnv(spec.Env, spec.SecretEnv)
	if err != nil {
		return "", "", err
	}
	spec.Env = nil
	b, err := json.Marshal(spec)
	if err != nil {
		return "", "", err
	}
	if len(env) == 0 {
		return string(b), "", nil
	}
	e, err := json.Marshal(env)
	if err != nil {
		return "", "", err
	}
	return string(b), s.key.SealString(e, ad), nil
}

// joinSpec decodes a spec column and its sealed env into spec. An env
// that does not open is failed_precondition: the state dir's seal key is
// not the one that wrote it. (The error never carries the value.)
func (s *Store) joinSpec(ad []byte, specJSON, sealed string, spec *sandbox.Spec) error {
	if err := json.Unmarshal([]byte(specJSON), spec); err != nil {
		return err
	}
	if sealed == "" {
		return nil
	}
	b, err := s.key.OpenString(sealed, ad)
	if errors.Is(err, seal.ErrWrongKey) {
		return fmt.Errorf("%w: its env was sealed with another key than this state directory's", errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		return fmt.Errorf("%w: its sealed env: %w", errdefs.ErrFailedPrecondition, err)
	}
	spec.Env = nil
	if err := json.Unmarshal(b, &spec.Env); err != nil {
		return fmt.Errorf("%w: its sealed env is not a JSON object", errdefs.ErrFailedPrecondition)
	}
	return splitSecretEnv(spec)
}

// secretEnvKey holds a spec's SecretEnv (as a JSON object) in the sealed
// env: a key no environment variable can have, so it never collides.
const secretEnvKey = "corral.secret_env"

// withSecretEnv is env with secret (the values of the spec's secrets)
// under secretEnvKey, when there are any.
func withSecretEnv(env, secret map[string]string) (map[string]string, error) {
	if len(secret) == 0 {
		return env, nil
	}
	b, err := json.Marshal(secret)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(env)+1)
	for k, v := range env {
		out[k] = v
	}
	out[secretEnvKey] = string(b)
	return out, nil
}

// splitSecretEnv moves secretEnvKey out of spec.Env into spec.SecretEnv.
func splitSecretEnv(spec *sandbox.Spec) error {
	raw, ok := spec.Env[secretEnvKey]
	if !ok {
		return nil
	}
	delete(spec.Env, secretEnvKey)
	if len(spec.Env) == 0 {
		spec.Env = nil
	}
	if err := json.Unmarshal([]byte(raw), &spec.SecretEnv); err != nil {
		return fmt.Errorf("%w: its sealed secret env is not a JSON object", errdefs.ErrFailedPrecondition)
	}
	return nil
}

// sealLegacyEnv moves the env of every row an older daemon wrote (in the
// spec, in the clear) into env_sealed, and reports how many rows it
// changed. With secure_delete on, the old bytes are overwritten, not
// only unlinked.
func (s *Store) sealLegacyEnv(ctx context.Context) (int, error) {
	n := 0
	for _, t := range []struct {
		table string
		ad    func(string) []byte
	}{{"sandboxes", sandboxAD}, {"snapshots", snapshotAD}} {
		rows, err := s.db.QueryContext(ctx, `SELECT id, spec FROM `+t.table+` WHERE json_extract(spec, '$.env') IS NOT NULL`)
		if err != nil {
			return n, fmt.Errorf("finding unsealed %s: %w", t.table, err)
		}
		type row struct{ id, spec string }
		var todo []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.spec); err != nil {
				rows.Close()
				return n, err
			}
			todo = append(todo, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return n, err
		}
		for _, r := range todo {
			var spec sandbox.Spec
			if err := json.Unmarshal([]byte(r.spec), &spec); err != nil {
				return n, fmt.Errorf("decoding spec of %s: %w", r.id, err)
			}
			specJSON, env, err := s.splitSpec(t.ad(r.id), spec)
			if err != nil {
				return n, fmt.Errorf("encoding spec of %s: %w", r.id, err)
			}
			if _, err := s.db.ExecContext(ctx, `UPDATE `+t.table+` SET spec = ?, env_sealed = ? WHERE id = ?`, specJSON, env, r.id); err != nil {
				return n, fmt.Errorf("sealing the env of %s: %w", r.id, err)
			}
			n++
		}
	}
	return n, nil
}
