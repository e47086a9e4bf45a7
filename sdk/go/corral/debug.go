package corral

import (
	"context"
	"net/url"

	"corral/pkg/apiv1"
)

// DebugRuntime returns the daemon process's own resources; gc measures
// them right after a garbage collection.
func (c *Client) DebugRuntime(ctx context.Context, gc bool) (*apiv1.DebugRuntime, error) {
	q := url.Values{}
	if gc {
		q.Set("gc", "true")
	}
	var out apiv1.DebugRuntime
	if err := c.call(ctx, "GET", "/v1/debug/runtime", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
