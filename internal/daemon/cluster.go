package daemon

import (
	"context"
	"crypto/tls"
	"net"

	"corral/internal/cluster/node"
	"corral/internal/e2b"
	"corral/internal/manager"
)

// joinCluster makes this daemon a node of the cluster in cfg.Cluster: it
// registers m's capacity and heartbeats; control planes reach its API
// with the node's credential (node.Node.Handler).
func joinCluster(ctx context.Context, cfg Config, m *manager.Manager, token string) (*node.Node, error) {
	c := cfg.Cluster
	c.StateDir = cfg.StateDir
	c.Log = cfg.Logger
	c.E2BKeyPrefix = e2b.KeyPrefix
	return node.Join(ctx, c, m, token)
}

// tlsListener is ln serving TLS with cfg, or ln itself when cfg is nil
// (a daemon that is not a cluster node).
func tlsListener(ln net.Listener, cfg *tls.Config) net.Listener {
	if cfg == nil {
		return ln
	}
	return tls.NewListener(ln, cfg)
}
