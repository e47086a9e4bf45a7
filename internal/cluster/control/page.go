package control

import (
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// maxListLimit is a node's bound on one page (manager.MaxListLimit), and
// so a control plane's.
const maxListLimit = 1000

// maxTagFilters bounds a list's tag filters, as a node does.
const maxTagFilters = 64

// readListFilter reads and checks a list's query as a node's list does
// (internal/api listOptions): state (repeated or comma-separated; "lost"
// too, for sandboxes of a lost node), tag (repeated, key=value or key),
// limit and next.
func readListFilter(q url.Values) (store.ListFilter, error) {
	f := store.ListFilter{Limit: maxListLimit}
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if !sandbox.State(st).Valid() && st != store.StateLost {
				return f, errdefs.Invalid("state", "unknown state %q", st)
			}
			f.States = append(f.States, st)
		}
	}
	if tags := q["tag"]; len(tags) > 0 {
		if len(tags) > maxTagFilters {
			return f, errdefs.Invalid("tag", "at most %d tag filters", maxTagFilters)
		}
		f.Tags = map[string]string{}
		for _, t := range tags {
			k, v, _ := strings.Cut(t, "=")
			if !sandbox.ValidTagKey(k) || len(v) > 256 {
				return f, errdefs.Invalid("tag", "%q is not a tag filter (key=value, or key for any value)", t)
			}
			f.Tags[k] = v
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			return f, errdefs.Invalid("limit", "must be between 1 and %d, got %q", maxListLimit, l)
		}
		f.Limit = n
	}
	var err error
	f.After, err = parseCursor(q.Get("next"))
	return f, err
}

// cursorToken is a list's next token for position c, written as a node
// writes its own (records.Cursor.String: base64url of "<created_at unix
// nanoseconds>/<id>", unpadded; page_test checks the two agree); "" for
// none.
func cursorToken(c store.Cursor) string {
	if c.ID == "" {
		return ""
	}
	raw := strconv.FormatInt(c.CreatedNS, 10) + "/" + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// parseCursor reads a next token ("": the start).
func parseCursor(token string) (store.Cursor, error) {
	if token == "" {
		return store.Cursor{}, nil
	}
	bad := errdefs.Invalid("next", "not a listing cursor (pass back the next token of the previous page)")
	if len(token) > 128 {
		return store.Cursor{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return store.Cursor{}, bad
	}
	ns, id, ok := strings.Cut(string(raw), "/")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || n <= 0 || id == "" {
		return store.Cursor{}, bad
	}
	return store.Cursor{CreatedNS: n, ID: id}, nil
}
