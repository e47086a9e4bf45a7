package corral

import (
	"context"
	"strconv"
	"time"

	"corral/pkg/apiv1"
)

// Update changes a running or paused sandbox's lifetime and tags
// (PATCH /v1/sandboxes/{id}) and returns its record.
func (c *Client) Update(ctx context.Context, id string, req apiv1.UpdateSandboxRequest) (*apiv1.Sandbox, error) {
	var sb apiv1.Sandbox
	if err := c.call(ctx, "PATCH", sbPath(id), nil, req, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// SetTimeout makes the sandbox's lifetime end d from now, shortening or
// extending it; with extendOnly it is never shortened.
func (c *Client) SetTimeout(ctx context.Context, id string, d time.Duration, extendOnly bool) (*apiv1.Sandbox, error) {
	secs := d.Seconds()
	return c.Update(ctx, id, apiv1.UpdateSandboxRequest{Timeout: &secs, ExtendOnly: extendOnly})
}

// SetTags merges tags into the sandbox's tags: a value sets a tag, nil
// removes it, tags not named stay.
func (c *Client) SetTags(ctx context.Context, id string, tags map[string]*string) (*apiv1.Sandbox, error) {
	return c.Update(ctx, id, apiv1.UpdateSandboxRequest{Tags: tags})
}

// ListOptions filter and page a listing (ListPage).
type ListOptions struct {
	// States keeps sandboxes in any of these states; empty keeps all.
	States []string
	// Tags keeps sandboxes with every one of these tags ("" as a value:
	// the key is present, whatever its value).
	Tags map[string]string
	// Limit bounds the page (the daemon's maximum, 1000, when zero).
	Limit int
	// Next is the previous page's Next ("" starts at the oldest).
	Next string
}

// ListPage returns one page of sandboxes, oldest first; its Next, when
// set, continues the listing.
func (c *Client) ListPage(ctx context.Context, o ListOptions) (*apiv1.SandboxList, error) {
	q := map[string][]string{"state": o.States}
	for k, v := range o.Tags {
		if v != "" {
			k += "=" + v
		}
		q["tag"] = append(q["tag"], k)
	}
	if o.Limit > 0 {
		q["limit"] = []string{strconv.Itoa(o.Limit)}
	}
	if o.Next != "" {
		q["next"] = []string{o.Next}
	}
	var out apiv1.SandboxList
	if err := c.call(ctx, "GET", "/v1/sandboxes", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAll returns every sandbox that o selects, following the pages.
func (c *Client) ListAll(ctx context.Context, o ListOptions) ([]apiv1.Sandbox, error) {
	var all []apiv1.Sandbox
	for {
		page, err := c.ListPage(ctx, o)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Sandboxes...)
		if page.Next == "" {
			return all, nil
		}
		o.Next = page.Next
	}
}
