package manager

import (
	"context"
	"sync/atomic"

	"corral/internal/records"
)

// SecretStore is where a daemon's secrets are kept and read: its own
// records (sealed with its state directory's key) alone, or a cluster's
// database (sealed with a key derived from the join token) on a node,
// so that every node resolves the same secrets. Values leave it only
// through SecretValues, for injection; no error carries a value.
type SecretStore interface {
	CreateSecret(ctx context.Context, name string, keys []string, values map[string]string) (records.SecretInfo, error)
	RotateSecret(ctx context.Context, name string, keys []string, values map[string]string) (records.SecretInfo, error)
	DeleteSecret(ctx context.Context, name string) error
	SecretInfo(ctx context.Context, name string) (records.SecretInfo, error)
	ListSecrets(ctx context.Context) ([]records.SecretInfo, error)
	SecretValues(ctx context.Context, name string) (map[string]string, error)
}

// secretSource holds the store UseSecretStore set, if any.
type secretSource struct{ p atomic.Pointer[SecretStore] }

// UseSecretStore makes s the manager's secret store in place of its
// records (a node joining a cluster, before it serves): creates, execs
// and egress injection then read values from s, and the secrets API
// lists and changes s's.
func (m *Manager) UseSecretStore(s SecretStore) { m.secrets.p.Store(&s) }

// secretStore is the store in use.
func (m *Manager) secretStore() SecretStore {
	if s := m.secrets.p.Load(); s != nil {
		return *s
	}
	return m.records
}
