package node

import (
	"context"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/manager"
	"corral/internal/seal"
)

// clusterSecrets is a node's secret store (manager.SecretStore): the
// cluster's, in its database, sealed with the key the join token derives
// (nodeauth.SecretKey). A node reads a secret's sealed row and opens it
// itself when a sandbox or process names it, so values never cross the
// link between control planes and nodes; every node resolves the same
// secrets.
type clusterSecrets struct {
	st  *store.Store
	key *seal.Key
}

func newClusterSecrets(st *store.Store, join string) (*clusterSecrets, error) {
	k, err := seal.New(nodeauth.SecretKey(join))
	if err != nil {
		return nil, err
	}
	return &clusterSecrets{st: st, key: k}, nil
}

func infoOf(i store.SecretInfo) manager.SecretInfo {
	return manager.SecretInfo{Name: i.Name, Keys: i.Keys, CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt}
}

func (c *clusterSecrets) CreateSecret(ctx context.Context, name string, keys []string, values map[string]string) (manager.SecretInfo, error) {
	i, err := c.st.CreateSecret(ctx, c.key, name, keys, values)
	return infoOf(i), err
}

func (c *clusterSecrets) RotateSecret(ctx context.Context, name string, keys []string, values map[string]string) (manager.SecretInfo, error) {
	i, err := c.st.RotateSecret(ctx, c.key, name, keys, values)
	return infoOf(i), err
}

func (c *clusterSecrets) DeleteSecret(ctx context.Context, name string) error {
	return c.st.DeleteSecret(ctx, name)
}

func (c *clusterSecrets) SecretInfo(ctx context.Context, name string) (manager.SecretInfo, error) {
	i, err := c.st.SecretInfo(ctx, name)
	return infoOf(i), err
}

func (c *clusterSecrets) ListSecrets(ctx context.Context) ([]manager.SecretInfo, error) {
	list, err := c.st.ListSecrets(ctx)
	out := make([]manager.SecretInfo, len(list))
	for i, s := range list {
		out[i] = infoOf(s)
	}
	return out, err
}

func (c *clusterSecrets) SecretValues(ctx context.Context, name string) (map[string]string, error) {
	return c.st.SecretValues(ctx, c.key, name)
}
