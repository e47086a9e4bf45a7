package corral

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"

	"corral/pkg/apiv1"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// ReadFile streams a file out of a sandbox.
func (c *Client) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, int64, error) {
	resp, err := c.do(ctx, "GET", sbPath(id, "/files"), url.Values{"path": {path}}, nil, "")
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// WriteFile streams r into a file in a sandbox (atomically replaced).
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader, mode os.FileMode) (apiv1.Entry, error) {
	q := url.Values{"path": {path}, "mode": {fmt.Sprintf("%04o", mode.Perm())}}
	var e apiv1.Entry
	resp, err := c.do(ctx, "PUT", sbPath(id, "/files"), q, io.NopCloser(r), "application/octet-stream")
	if err != nil {
		return e, err
	}
	defer resp.Body.Close()
	return e, json.NewDecoder(resp.Body).Decode(&e)
}

// Stat describes a path in a sandbox.
func (c *Client) Stat(ctx context.Context, id, path string) (apiv1.Entry, error) {
	var e apiv1.Entry
	err := c.call(ctx, "GET", sbPath(id, "/fs/stat"), url.Values{"path": {path}}, nil, &e)
	return e, err
}

// ListDir lists a directory in a sandbox, depth levels deep.
func (c *Client) ListDir(ctx context.Context, id, path string, depth int) ([]apiv1.Entry, error) {
	var out apiv1.EntryList
	err := c.call(ctx, "GET", sbPath(id, "/fs/list"), url.Values{"path": {path}, "depth": {strconv.Itoa(depth)}}, nil, &out)
	return out.Entries, err
}

// MakeDir creates a directory and its parents.
func (c *Client) MakeDir(ctx context.Context, id, path string) (apiv1.Entry, error) {
	var e apiv1.Entry
	err := c.call(ctx, "POST", sbPath(id, "/fs/mkdir"), nil, apiv1.PathRequest{Path: path}, &e)
	return e, err
}

// Remove removes a path (recursively if asked).
func (c *Client) Remove(ctx context.Context, id, path string, recursive bool) error {
	return c.call(ctx, "POST", sbPath(id, "/fs/remove"), nil, apiv1.PathRequest{Path: path, Recursive: recursive}, nil)
}

// Rename moves a path.
func (c *Client) Rename(ctx context.Context, id, from, to string) (apiv1.Entry, error) {
	var e apiv1.Entry
	err := c.call(ctx, "POST", sbPath(id, "/fs/rename"), nil, apiv1.RenameRequest{From: from, To: to}, &e)
	return e, err
}

// Chmod changes a path's permissions.
func (c *Client) Chmod(ctx context.Context, id, path string, mode os.FileMode) (apiv1.Entry, error) {
	var e apiv1.Entry
	err := c.call(ctx, "POST", sbPath(id, "/fs/chmod"), nil, apiv1.PathRequest{Path: path, Mode: uint32(mode.Perm())}, &e)
	return e, err
}
