package corral

import (
	"context"
	"net/url"
	"time"

	"corral/pkg/apiv1"
)

// UsageOptions selects a usage report: the sandboxes that ran in [From,
// To) (zero From: the daemon's default, 24 hours ago; zero To: now),
// grouped by GroupBy ("" one total, "sandbox", "runtime" or "tag:KEY").
type UsageOptions struct {
	From, To time.Time
	GroupBy  string
}

// Usage returns the daemon's usage report (GET /v1/usage).
func (c *Client) Usage(ctx context.Context, opts UsageOptions) (*apiv1.UsageReport, error) {
	q := url.Values{}
	if !opts.From.IsZero() {
		q.Set("from", opts.From.UTC().Format(time.RFC3339Nano))
	}
	if !opts.To.IsZero() {
		q.Set("to", opts.To.UTC().Format(time.RFC3339Nano))
	}
	if opts.GroupBy != "" {
		q.Set("group_by", opts.GroupBy)
	}
	var out apiv1.UsageReport
	if err := c.call(ctx, "GET", "/v1/usage", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SandboxUsage returns what sandbox id used: so far while it lives,
// settled once it ended (GET /v1/sandboxes/{id}/usage).
func (c *Client) SandboxUsage(ctx context.Context, id string) (*apiv1.SandboxUsage, error) {
	var out apiv1.SandboxUsage
	if err := c.call(ctx, "GET", sbPath(id, "/usage"), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
