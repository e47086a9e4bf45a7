package corral

import (
	"context"

	"corral/pkg/apiv1"
)

// ClusterNodes lists a cluster's nodes (a control plane's API only).
func (c *Client) ClusterNodes(ctx context.Context) ([]apiv1.ClusterNode, error) {
	var out apiv1.ClusterNodes
	if err := c.call(ctx, "GET", "/v1/cluster/nodes", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Nodes, nil
}
