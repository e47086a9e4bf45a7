package agentapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"corral/internal/errdefs"
)

// QueryXattrs is the PUT /files query parameter carrying an XattrSet as
// JSON (since XattrsSince).
const QueryXattrs = "xattrs"

// Validate checks a set against the namespace and the bounds both sides
// enforce: the prefix in the user namespace, names non-empty and free of
// NUL, every whole name within MaxXattrName, and the names and values
// together within MaxXattrTotal.
func (x *XattrSet) Validate() error {
	if !strings.HasPrefix(x.Prefix, XattrUserPrefix) || strings.IndexByte(x.Prefix, 0) >= 0 {
		return errdefs.Invalid("xattrs", "the prefix must start with %q", XattrUserPrefix)
	}
	total := 0
	for k, v := range x.Values {
		if k == "" || strings.IndexByte(k, 0) >= 0 {
			return errdefs.Invalid("xattrs", "a name is empty or holds a NUL byte")
		}
		if len(x.Prefix)+len(k) > MaxXattrName {
			return errdefs.Invalid("xattrs", "name %.40q is over %d bytes with its prefix", k, MaxXattrName)
		}
		total += len(x.Prefix) + len(k) + len(v)
	}
	if total > MaxXattrTotal {
		return errdefs.Invalid("xattrs", "%d bytes of names and values, over %d", total, MaxXattrTotal)
	}
	return nil
}

// ParseXattrs decodes and validates the xattrs query parameter; an empty
// one is no set (nil).
func ParseXattrs(raw string) (*XattrSet, error) {
	if raw == "" {
		return nil, nil
	}
	var x XattrSet
	if err := json.Unmarshal([]byte(raw), &x); err != nil {
		return nil, errdefs.Invalid("xattrs", "not a JSON attribute set: %v", err)
	}
	if err := x.Validate(); err != nil {
		return nil, err
	}
	return &x, nil
}

// WriteOptions are the optional parts of a file write.
type WriteOptions struct {
	// InPlace writes into the file itself (WriteFileInPlace).
	InPlace bool
	// Xattrs, when not nil, replaces the file's attributes under its
	// prefix (since XattrsSince; an older agent is refused with
	// errdefs.ErrNotSupported before anything is sent).
	Xattrs *XattrSet
}

// WriteFileWith is WriteFile with options: in place, and extended
// attributes set on the written file. The returned EntryInfo carries the
// attributes read back (Xattrs), or XattrsUnsupported where the file's
// filesystem refused them; the body is written either way.
func (c *Client) WriteFileWith(ctx context.Context, path string, r io.Reader, mode os.FileMode, user string, opt WriteOptions) (EntryInfo, error) {
	q := url.Values{"path": {path}}
	if opt.InPlace {
		q.Set("inplace", "1")
	}
	if mode != 0 {
		q.Set("mode", "0"+strconv.FormatUint(uint64(UnixMode(mode)), 8))
	}
	if opt.Xattrs != nil {
		if c.version < XattrsSince {
			return EntryInfo{}, fmt.Errorf("agent write %s: %w: extended attributes need protocol %d; agent %s speaks %d",
				path, errdefs.ErrNotSupported, XattrsSince, c.agentVersion, c.version)
		}
		if err := opt.Xattrs.Validate(); err != nil {
			return EntryInfo{}, fmt.Errorf("agent write %s: %w", path, err)
		}
		raw, err := json.Marshal(opt.Xattrs)
		if err != nil {
			return EntryInfo{}, fmt.Errorf("agent write %s: %w: %v", path, errdefs.ErrInvalidArgument, err)
		}
		q.Set(QueryXattrs, string(raw))
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

// StatXattrs is Stat with the entry's extended attributes under prefix
// (EntryInfo.Xattrs, names without it). An agent older than XattrsSince
// has no way to read them: its entry comes without them.
func (c *Client) StatXattrs(ctx context.Context, path, user, prefix string) (EntryInfo, error) {
	var info EntryInfo
	q := userQuery(url.Values{"path": {path}}, user)
	if c.version >= XattrsSince {
		q.Set(QueryXattrs, prefix)
	}
	if err := c.callJSON(ctx, http.MethodGet, c.prefix+PathStat, q, nil, &info); err != nil {
		return EntryInfo{}, fmt.Errorf("agent stat %s: %w", path, err)
	}
	return info, nil
}

// ListDirXattrs is ListDir with each entry's extended attributes under
// prefix, as StatXattrs.
func (c *Client) ListDirXattrs(ctx context.Context, path string, depth int, user, prefix string) ([]EntryInfo, error) {
	q := userQuery(url.Values{"path": {path}, "depth": {strconv.Itoa(max(depth, 1))}}, user)
	if c.version >= XattrsSince {
		q.Set(QueryXattrs, prefix)
	}
	var out DirList
	if err := c.callJSON(ctx, http.MethodGet, c.prefix+PathListDir, q, nil, &out); err != nil {
		return nil, fmt.Errorf("agent list %s: %w", path, err)
	}
	return out.Entries, nil
}
