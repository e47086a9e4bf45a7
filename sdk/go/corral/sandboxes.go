package corral

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"corral/pkg/apiv1"
)

// Create creates a sandbox and returns it running.
func (c *Client) Create(ctx context.Context, req apiv1.CreateSandboxRequest) (*apiv1.Sandbox, error) {
	var sb apiv1.Sandbox
	if err := c.call(ctx, "POST", "/v1/sandboxes", nil, req, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// Get returns one sandbox.
func (c *Client) Get(ctx context.Context, id string) (*apiv1.Sandbox, error) {
	var sb apiv1.Sandbox
	if err := c.call(ctx, "GET", sbPath(id), nil, nil, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// List returns every sandbox (state filters when not empty), following
// the pages.
func (c *Client) List(ctx context.Context, state string) ([]apiv1.Sandbox, error) {
	var o ListOptions
	if state != "" {
		o.States = []string{state}
	}
	return c.ListAll(ctx, o)
}

// Terminate ends a sandbox and returns its final record.
func (c *Client) Terminate(ctx context.Context, id string) (*apiv1.Sandbox, error) {
	var sb apiv1.Sandbox
	if err := c.call(ctx, "DELETE", sbPath(id), nil, nil, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// TerminateNoWait starts terminating a sandbox and returns at once, with
// the record in state terminating (or already ended); the daemon finishes
// removing it in the background (Wait tells when).
func (c *Client) TerminateNoWait(ctx context.Context, id string) (*apiv1.Sandbox, error) {
	var sb apiv1.Sandbox
	if err := c.call(ctx, "DELETE", sbPath(id), url.Values{"wait": {"false"}}, nil, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// SetNetwork replaces a running sandbox's network policy.
func (c *Client) SetNetwork(ctx context.Context, id string, p apiv1.NetworkPolicy) (*apiv1.Sandbox, error) {
	var sb apiv1.Sandbox
	if err := c.call(ctx, "PUT", sbPath(id, "/network"), nil, p, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// Wait blocks until the sandbox ends; timeoutSec 0 waits indefinitely.
func (c *Client) Wait(ctx context.Context, id string, timeoutSec float64) (apiv1.WaitResult, error) {
	q := url.Values{}
	if timeoutSec > 0 {
		q.Set("timeout", fmt.Sprint(timeoutSec))
	}
	var out apiv1.WaitResult
	err := c.call(ctx, "POST", sbPath(id, "/wait"), q, nil, &out)
	return out, err
}

// Logs returns the entrypoint's output; follow streams until the end.
func (c *Client) Logs(ctx context.Context, id string, follow bool) (io.ReadCloser, error) {
	q := url.Values{}
	if follow {
		q.Set("follow", "true")
	}
	resp, err := c.do(ctx, "GET", sbPath(id, "/logs"), q, nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Events returns a sandbox's event log.
func (c *Client) Events(ctx context.Context, id string) ([]apiv1.Event, error) {
	return c.EventsAfter(ctx, id, 0, 0)
}

// EventsAfter returns sandbox id's events after sequence number after,
// oldest first, following the pages to the end, or to max events when
// max > 0.
func (c *Client) EventsAfter(ctx context.Context, id string, after int64, max int) ([]apiv1.Event, error) {
	var all []apiv1.Event
	for {
		var page apiv1.EventList
		q := url.Values{}
		if after > 0 {
			q.Set("after", strconv.FormatInt(after, 10))
		}
		if err := c.call(ctx, "GET", sbPath(id, "/events"), q, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Events...)
		if max > 0 && len(all) >= max {
			return all[:max], nil
		}
		if page.Next == 0 || page.Next <= after {
			return all, nil
		}
		after = page.Next
	}
}

// Version reports the daemon's version, runtimes and warm pool.
func (c *Client) Version(ctx context.Context) (*apiv1.Version, error) {
	var v apiv1.Version
	if err := c.call(ctx, "GET", "/v1/version", nil, nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Pause saves a running sandbox to disk, freeing its CPU and memory.
func (c *Client) Pause(ctx context.Context, id string) (*apiv1.Sandbox, error) {
	var sb apiv1.Sandbox
	if err := c.call(ctx, "POST", sbPath(id, "/pause"), nil, nil, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// PauseFilesystem pauses a running sandbox keeping only its root
// filesystem (as an image): its processes end, and Resume boots it
// afresh on its files, under the same id.
func (c *Client) PauseFilesystem(ctx context.Context, id string) (*apiv1.Sandbox, error) {
	keep := false
	var sb apiv1.Sandbox
	if err := c.call(ctx, "POST", sbPath(id, "/pause"), nil, apiv1.PauseRequest{KeepMemory: &keep}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// Resume brings a paused sandbox back with its processes and files.
func (c *Client) Resume(ctx context.Context, id string) (*apiv1.Sandbox, error) {
	var sb apiv1.Sandbox
	if err := c.call(ctx, "POST", sbPath(id, "/resume"), nil, nil, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}
