package corral

import (
	"context"
	"net/url"

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

// DrainNode stops (on) or resumes (off) placing sandboxes on node id; a
// drain also has the cluster move the node's paused sandboxes to other
// nodes (the node's Drain reports the progress: ClusterNodes). It returns
// the node as it is now.
func (c *Client) DrainNode(ctx context.Context, id string, on bool) (*apiv1.ClusterNode, error) {
	op := "drain"
	if !on {
		op = "undrain"
	}
	var n apiv1.ClusterNode
	if err := c.call(ctx, "POST", "/v1/cluster/nodes/"+url.PathEscape(id)+"/"+op, nil, nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}
