package corral

import (
	"context"
	"encoding/json"
	"io"
	"net/url"

	"corral/pkg/apiv1"
)

// Images lists the daemon's images.
func (c *Client) Images(ctx context.Context) ([]apiv1.Image, error) {
	var out apiv1.ImageList
	err := c.call(ctx, "GET", "/v1/images", nil, nil, &out)
	return out.Images, err
}

// Image inspects one image (name:tag, name or sha256:...).
func (c *Client) Image(ctx context.Context, ref string) (*apiv1.Image, error) {
	var img apiv1.Image
	if err := c.call(ctx, "GET", "/v1/images/"+escapeRef(ref), nil, nil, &img); err != nil {
		return nil, err
	}
	return &img, nil
}

// RemoveImage untags an image.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	return c.call(ctx, "DELETE", "/v1/images/"+escapeRef(ref), nil, nil, nil)
}

// PruneImages removes what no tag or sandbox holds.
func (c *Client) PruneImages(ctx context.Context) (apiv1.PruneReport, error) {
	var rep apiv1.PruneReport
	err := c.call(ctx, "POST", "/v1/images/prune", nil, nil, &rep)
	return rep, err
}

// escapeRef escapes each path segment of a reference, keeping its slashes.
func escapeRef(ref string) string {
	u := url.URL{Path: ref}
	return u.EscapedPath()
}

// ImportImage uploads an image archive (docker save, or a tar of an OCI
// layout) and tags it ref.
func (c *Client) ImportImage(ctx context.Context, r io.Reader, ref string) (*apiv1.Image, error) {
	resp, err := c.do(ctx, "POST", "/v1/images/import", url.Values{"ref": {ref}}, io.NopCloser(r), "application/x-tar")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var img apiv1.Image
	return &img, json.NewDecoder(resp.Body).Decode(&img)
}

// PullImage fetches an image from a registry into the daemon.
func (c *Client) PullImage(ctx context.Context, ref string, insecure bool) (*apiv1.Image, error) {
	var img apiv1.Image
	if err := c.call(ctx, "POST", "/v1/images/pull", nil, apiv1.PullRequest{Ref: ref, Insecure: insecure}, &img); err != nil {
		return nil, err
	}
	return &img, nil
}
