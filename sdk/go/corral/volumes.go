package corral

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"

	"corral/pkg/apiv1"
)

func volPath(name string, rest string) string {
	return "/v1/volumes/" + url.PathEscape(name) + rest
}

// CreateVolume makes a named volume of sizeGiB (0: the daemon's default,
// 1 GiB).
func (c *Client) CreateVolume(ctx context.Context, name string, sizeGiB int64) (*apiv1.Volume, error) {
	var v apiv1.Volume
	if err := c.call(ctx, "POST", "/v1/volumes", nil, apiv1.CreateVolumeRequest{Name: name, SizeGiB: sizeGiB}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Volumes lists the volumes.
func (c *Client) Volumes(ctx context.Context) ([]apiv1.Volume, error) {
	var out apiv1.VolumeList
	if err := c.call(ctx, "GET", "/v1/volumes", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Volumes, nil
}

// Volume describes volume name.
func (c *Client) Volume(ctx context.Context, name string) (*apiv1.Volume, error) {
	var v apiv1.Volume
	if err := c.call(ctx, "GET", volPath(name, ""), nil, nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// RemoveVolume deletes volume name and its data; refused while live
// sandboxes mount it, unless force (which terminates them first).
func (c *Client) RemoveVolume(ctx context.Context, name string, force bool) error {
	q := url.Values{}
	if force {
		q.Set("force", "true")
	}
	return c.call(ctx, "DELETE", volPath(name, ""), q, nil, nil)
}

// ReadVolumeFile streams file path out of volume name, without a
// sandbox.
func (c *Client) ReadVolumeFile(ctx context.Context, name, path string) (io.ReadCloser, int64, error) {
	resp, err := c.do(ctx, "GET", volPath(name, "/files"), url.Values{"path": {path}}, nil, "")
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// WriteVolumeFile streams r into file path of volume name (parents made),
// without a sandbox.
func (c *Client) WriteVolumeFile(ctx context.Context, name, path string, r io.Reader, mode os.FileMode) (apiv1.Entry, error) {
	q := url.Values{"path": {path}, "mode": {fmt.Sprintf("%04o", mode.Perm())}}
	var e apiv1.Entry
	resp, err := c.do(ctx, "PUT", volPath(name, "/files"), q, io.NopCloser(r), "application/octet-stream")
	if err != nil {
		return e, err
	}
	defer resp.Body.Close()
	return e, json.NewDecoder(resp.Body).Decode(&e)
}

// ListVolumeDir lists directory path ("" or "/": the root) of volume
// name, without a sandbox.
func (c *Client) ListVolumeDir(ctx context.Context, name, path string) ([]apiv1.Entry, error) {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	var out apiv1.EntryList
	if err := c.call(ctx, "GET", volPath(name, "/list"), q, nil, &out); err != nil {
		return nil, err
	}
	return out.Entries, nil
}
