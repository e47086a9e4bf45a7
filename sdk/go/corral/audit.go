package corral

import (
	"context"
	"io"
	"net/url"
	"strconv"

	"corral/pkg/apiv1"
)

// AuditQuery selects entries of the audit trail; zero values select all.
type AuditQuery struct {
	Sandbox string   // id or name
	Since   string   // RFC 3339 or a duration back from now ("24h")
	Kinds   []string // any of these kinds
	After   int64    // continue after this seq (a daemon's AuditPage.Next)
	// Next continues from a page's Next, a daemon's or a cluster control
	// plane's (a position in the cluster's trail); it takes
	// precedence over After.
	Next  string
	Limit int // at most this many (1 to 1000; 0: the daemon's default)
}

func (q AuditQuery) values() url.Values {
	v := url.Values{}
	if q.Sandbox != "" {
		v.Set("sandbox", q.Sandbox)
	}
	if q.Since != "" {
		v.Set("since", q.Since)
	}
	for _, k := range q.Kinds {
		v.Add("kind", k)
	}
	if q.Next != "" {
		v.Set("after", q.Next)
	} else if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Audit returns a page of the audit trail, oldest first.
func (c *Client) Audit(ctx context.Context, q AuditQuery) (*apiv1.AuditPage, error) {
	var out apiv1.AuditPage
	if err := c.call(ctx, "GET", "/v1/audit", q.values(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AuditExport returns the entries q selects (its limit aside) as JSON
// lines, exactly as stored; the caller closes it.
func (c *Client) AuditExport(ctx context.Context, q AuditQuery) (io.ReadCloser, error) {
	q.Limit = 0
	resp, err := c.do(ctx, "GET", "/v1/audit/export", q.values(), nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// AuditVerify has the daemon walk the whole trail's hash chain.
func (c *Client) AuditVerify(ctx context.Context) (*apiv1.AuditReport, error) {
	var out apiv1.AuditReport
	if err := c.call(ctx, "GET", "/v1/audit/verify", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
