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

// FileOption adjusts one file call.
type FileOption func(*fileOptions)

type fileOptions struct{ user string }

// AsUser makes a file call act as user (a name or uid, optionally
// ":group"): it owns what the call creates, and a relative path starts at
// its home when the sandbox has no workdir. Without it the sandbox's
// default user does (the image's, or --user at create).
func AsUser(user string) FileOption { return func(o *fileOptions) { o.user = user } }

func fileOpts(opts []FileOption) fileOptions {
	var o fileOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// query is q with the options' user.
func (o fileOptions) query(q url.Values) url.Values {
	if o.user != "" {
		q.Set("user", o.user)
	}
	return q
}

// ReadFile streams a file out of a sandbox. A relative path resolves
// against the sandbox's workdir.
func (c *Client) ReadFile(ctx context.Context, id, path string, opts ...FileOption) (io.ReadCloser, int64, error) {
	q := fileOpts(opts).query(url.Values{"path": {path}})
	resp, err := c.do(ctx, "GET", sbPath(id, "/files"), q, nil, "")
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// WriteFile streams r into a file in a sandbox (atomically replaced),
// creating missing parents; the file and the parents it creates belong to
// the sandbox's user (or AsUser's).
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader, mode os.FileMode, opts ...FileOption) (apiv1.Entry, error) {
	q := fileOpts(opts).query(url.Values{"path": {path}, "mode": {fmt.Sprintf("%04o", mode.Perm())}})
	var e apiv1.Entry
	resp, err := c.do(ctx, "PUT", sbPath(id, "/files"), q, io.NopCloser(r), "application/octet-stream")
	if err != nil {
		return e, err
	}
	defer resp.Body.Close()
	return e, json.NewDecoder(resp.Body).Decode(&e)
}

// Stat describes a path in a sandbox.
func (c *Client) Stat(ctx context.Context, id, path string, opts ...FileOption) (apiv1.Entry, error) {
	var e apiv1.Entry
	err := c.call(ctx, "GET", sbPath(id, "/fs/stat"), fileOpts(opts).query(url.Values{"path": {path}}), nil, &e)
	return e, err
}

// ListDir lists a directory in a sandbox, depth levels deep.
func (c *Client) ListDir(ctx context.Context, id, path string, depth int, opts ...FileOption) ([]apiv1.Entry, error) {
	var out apiv1.EntryList
	q := fileOpts(opts).query(url.Values{"path": {path}, "depth": {strconv.Itoa(depth)}})
	err := c.call(ctx, "GET", sbPath(id, "/fs/list"), q, nil, &out)
	return out.Entries, err
}

// MakeDir creates a directory and its parents.
func (c *Client) MakeDir(ctx context.Context, id, path string, opts ...FileOption) (apiv1.Entry, error) {
	var e apiv1.Entry
	err := c.call(ctx, "POST", sbPath(id, "/fs/mkdir"), nil, apiv1.PathRequest{Path: path, User: fileOpts(opts).user}, &e)
	return e, err
}

// Remove removes a path (recursively if asked).
func (c *Client) Remove(ctx context.Context, id, path string, recursive bool, opts ...FileOption) error {
	req := apiv1.PathRequest{Path: path, Recursive: recursive, User: fileOpts(opts).user}
	return c.call(ctx, "POST", sbPath(id, "/fs/remove"), nil, req, nil)
}

// Rename moves a path.
func (c *Client) Rename(ctx context.Context, id, from, to string, opts ...FileOption) (apiv1.Entry, error) {
	var e apiv1.Entry
	err := c.call(ctx, "POST", sbPath(id, "/fs/rename"), nil, apiv1.RenameRequest{From: from, To: to, User: fileOpts(opts).user}, &e)
	return e, err
}

// Chmod changes a path's permissions.
func (c *Client) Chmod(ctx context.Context, id, path string, mode os.FileMode, opts ...FileOption) (apiv1.Entry, error) {
	var e apiv1.Entry
	req := apiv1.PathRequest{Path: path, Mode: uint32(mode.Perm()), User: fileOpts(opts).user}
	err := c.call(ctx, "POST", sbPath(id, "/fs/chmod"), nil, req, &e)
	return e, err
}
