package corral

import (
	"context"
	"net/url"

	"corral/pkg/apiv1"
)

// SnapshotMemory saves the running sandbox id's whole state (memory,
// processes, writable layer) as a snapshot, named name unless it is "";
// the sandbox keeps running.
func (c *Client) SnapshotMemory(ctx context.Context, id, name string) (*apiv1.Snapshot, error) {
	var sn apiv1.Snapshot
	if err := c.call(ctx, "POST", sbPath(id, "/snapshots/memory"), nil, apiv1.SnapshotMemoryRequest{Name: name}, &sn); err != nil {
		return nil, err
	}
	return &sn, nil
}

// Snapshots lists the memory snapshots.
func (c *Client) Snapshots(ctx context.Context) ([]apiv1.Snapshot, error) {
	var out apiv1.SnapshotList
	if err := c.call(ctx, "GET", "/v1/snapshots", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Snapshots, nil
}

// Snapshot returns the snapshot whose id or name is ref.
func (c *Client) Snapshot(ctx context.Context, ref string) (*apiv1.Snapshot, error) {
	var sn apiv1.Snapshot
	if err := c.call(ctx, "GET", "/v1/snapshots/"+url.PathEscape(ref), nil, nil, &sn); err != nil {
		return nil, err
	}
	return &sn, nil
}

// RemoveSnapshot deletes a snapshot; sandboxes started from it run on.
func (c *Client) RemoveSnapshot(ctx context.Context, ref string) (*apiv1.Snapshot, error) {
	var sn apiv1.Snapshot
	if err := c.call(ctx, "DELETE", "/v1/snapshots/"+url.PathEscape(ref), nil, nil, &sn); err != nil {
		return nil, err
	}
	return &sn, nil
}

// Fork starts n copies of the running sandbox id, each with its own
// identity.
func (c *Client) Fork(ctx context.Context, id string, n int) ([]apiv1.Sandbox, error) {
	var out apiv1.ForkResult
	if err := c.call(ctx, "POST", sbPath(id, "/fork"), nil, apiv1.ForkRequest{Count: n}, &out); err != nil {
		return nil, err
	}
	return out.Sandboxes, nil
}
