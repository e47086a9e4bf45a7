package corral

import (
	"context"
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
