package agentapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
)

// UnixMode converts an os.FileMode's permission, setuid, setgid and sticky
// bits to the unix mode bits used on the wire (07777).
func UnixMode(m os.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// FileMode converts wire mode bits (07777) to an os.FileMode.
func FileMode(u uint32) os.FileMode {
	m := os.FileMode(u & 0o777)
	if u&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if u&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if u&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// ReadFile opens a file for reading; it returns the body and its size.
// Relative paths start at user's home (root's when user is empty).
func (c *Client) ReadFile(ctx context.Context, path, user string) (io.ReadCloser, int64, error) {
	q := userQuery(url.Values{"path": {path}}, user)
	resp, err := c.do(ctx, http.MethodGet, c.prefix+PathFiles, q, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("agent read %s: %w", path, err)
	}
	return resp.Body, resp.ContentLength, nil
}

// WriteFile streams r into path atomically (a temporary file renamed over
// it), creating missing parent directories. A zero mode keeps an existing
// file's mode, or is 0644 for a new one. With user, the file is owned by
// that user and relative paths start at its home.
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader, mode os.FileMode, user string) (EntryInfo, error) {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", "0"+strconv.FormatUint(uint64(UnixMode(mode)), 8))
	}
	if user != "" {
		q.Set("user", user)
	}
	if r == nil {
		r = http.NoBody
	}
	var info EntryInfo
	if err := c.exchange(ctx, http.MethodPut, c.prefix+PathFiles, q, r, &info); err != nil {
		return EntryInfo{}, fmt.Errorf("agent write %s: %w", path, err)
	}
	return info, nil
}

// WriteFileInPlace is WriteFile into the file itself rather than through
// a temporary file renamed over it, so watchers see a write (E2B's envd
// semantics); readers may see a partial file meanwhile. An agent that
// predates it writes atomically instead.
func (c *Client) WriteFileInPlace(ctx context.Context, path string, r io.Reader, mode os.FileMode, user string) (EntryInfo, error) {
	q := url.Values{"path": {path}, "inplace": {"1"}}
	if mode != 0 {
		q.Set("mode", "0"+strconv.FormatUint(uint64(UnixMode(mode)), 8))
	}
	if r == nil {
		r = http.NoBody
	}
	var info EntryInfo
	if err := c.exchange(ctx, http.MethodPut, c.prefix+PathFiles, userQuery(q, user), r, &info); err != nil {
		return EntryInfo{}, fmt.Errorf("agent write %s: %w", path, err)
	}
	return info, nil
}

// userQuery adds user to q when it is not root's "".
func userQuery(q url.Values, user string) url.Values {
	if user != "" {
		q.Set("user", user)
	}
	return q
}

// Stat describes path; a final symlink is described, not followed. A
// relative path starts at user's home.
func (c *Client) Stat(ctx context.Context, path, user string) (EntryInfo, error) {
	var info EntryInfo
	q := userQuery(url.Values{"path": {path}}, user)
	if err := c.callJSON(ctx, http.MethodGet, c.prefix+PathStat, q, nil, &info); err != nil {
		return EntryInfo{}, fmt.Errorf("agent stat %s: %w", path, err)
	}
	return info, nil
}

// ListDir lists a directory to the given depth (0 means 1). A relative
// path starts at user's home.
func (c *Client) ListDir(ctx context.Context, path string, depth int, user string) ([]EntryInfo, error) {
	if depth <= 0 {
		depth = 1
	}
	q := userQuery(url.Values{"path": {path}, "depth": {strconv.Itoa(depth)}}, user)
	var out DirList
	if err := c.callJSON(ctx, http.MethodGet, c.prefix+PathListDir, q, nil, &out); err != nil {
		return nil, fmt.Errorf("agent list %s: %w", path, err)
	}
	return out.Entries, nil
}

// MakeDir creates path and its missing parents (mkdir -p), owned by user;
// a zero mode is 0755.
func (c *Client) MakeDir(ctx context.Context, path string, mode os.FileMode, user string) (EntryInfo, error) {
	var info EntryInfo
	req := MakeDirRequest{Path: path, Mode: UnixMode(mode), User: user}
	if err := c.callJSON(ctx, http.MethodPost, c.prefix+PathMakeDir, nil, req, &info); err != nil {
		return EntryInfo{}, fmt.Errorf("agent mkdir %s: %w", path, err)
	}
	return info, nil
}

// Remove removes path (a final symlink itself, not its target); a non-empty
// directory needs recursive. Removing "/" is refused.
func (c *Client) Remove(ctx context.Context, path string, recursive bool, user string) error {
	req := RemoveRequest{Path: path, Recursive: recursive, User: user}
	if err := c.callJSON(ctx, http.MethodPost, c.prefix+PathRemove, nil, req, nil); err != nil {
		return fmt.Errorf("agent remove %s: %w", path, err)
	}
	return nil
}

// Rename renames from to to and describes the result.
func (c *Client) Rename(ctx context.Context, from, to, user string) (EntryInfo, error) {
	var info EntryInfo
	req := RenameRequest{From: from, To: to, User: user}
	if err := c.callJSON(ctx, http.MethodPost, c.prefix+PathRename, nil, req, &info); err != nil {
		return EntryInfo{}, fmt.Errorf("agent rename %s to %s: %w", from, to, err)
	}
	return info, nil
}

// Chmod changes path's mode bits.
func (c *Client) Chmod(ctx context.Context, path string, mode os.FileMode, user string) (EntryInfo, error) {
	var info EntryInfo
	req := ChmodRequest{Path: path, Mode: UnixMode(mode), User: user}
	if err := c.callJSON(ctx, http.MethodPost, c.prefix+PathChmod, nil, req, &info); err != nil {
		return EntryInfo{}, fmt.Errorf("agent chmod %s: %w", path, err)
	}
	return info, nil
}

// ExportUpper streams a tar of the sandbox's writable layer in overlayfs
// form (GET /v1/fs/export-upper); not_supported where the agent cannot see
// it. A cut stream is a read error, never a short tar.
func (c *Client) ExportUpper(ctx context.Context) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, c.prefix+PathExportUpper, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("agent export of the writable layer: %w", err)
	}
	return resp.Body, nil
}
