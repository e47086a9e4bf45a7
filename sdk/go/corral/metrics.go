package corral

import (
	"context"
	"net/url"
	"time"

	"corral/pkg/apiv1"
)

// Metrics returns a sandbox's resource samples taken after since (all that
// the daemon keeps for a zero since), oldest first.
func (c *Client) Metrics(ctx context.Context, id string, since time.Time) (*apiv1.Metrics, error) {
	q := url.Values{}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	var out apiv1.Metrics
	if err := c.call(ctx, "GET", sbPath(id, "/metrics"), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
