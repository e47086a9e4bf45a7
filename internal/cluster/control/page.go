package control

import (
	"cmp"
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// maxListLimit is a node's bound on one page (manager.MaxListLimit), and
// so the merged page's.
const maxListLimit = 1000

// listPage is what one merged list asks: the page's size and where it
// starts. A node's listing token is a position in (creation time, id)
// order, not an offset (records.Cursor), so the same token starts every
// node's page at the same place, and a merged page's token is the
// position of its last sandbox.
type listPage struct {
	limit int
	next  string
}

// readListPage reads and checks limit and next from a list's query.
func readListPage(q url.Values) (listPage, error) {
	p := listPage{limit: maxListLimit, next: q.Get("next")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			return listPage{}, errdefs.Invalid("limit", "must be between 1 and %d, got %q", maxListLimit, l)
		}
		p.limit = n
	}
	if p.next != "" && !validCursor(p.next) {
		return listPage{}, errdefs.Invalid("next", "not a listing cursor (pass back the next token of the previous page)")
	}
	return p, nil
}

// cursorAfter is the listing token of the position of sb, as a node
// writes it (records.Cursor.String: base64url of "<created_at unix
// nanoseconds>/<id>", unpadded); control_test checks the two agree.
func cursorAfter(sb apiv1.Sandbox) string {
	raw := strconv.FormatInt(sb.CreatedAt.UnixNano(), 10) + "/" + sb.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// validCursor says whether token reads as a node's listing token.
func validCursor(token string) bool {
	if len(token) > 128 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return false
	}
	ns, id, ok := strings.Cut(string(raw), "/")
	n, err := strconv.ParseInt(ns, 10, 64)
	return ok && err == nil && n > 0 && id != ""
}

// merge makes one page of at most limit sandboxes out of the nodes'
// pages (each already after the same position, each in order): the
// first limit of them in (creation time, id) order, and the token of the
// next page, "" when no node has more. Every sandbox a page leaves out
// comes after its last one, so the next page (each node asked again from
// there) neither repeats nor skips one, whatever the nodes' clocks.
func merge(pages []apiv1.SandboxList, limit int) apiv1.SandboxList {
	out := apiv1.SandboxList{Sandboxes: []apiv1.Sandbox{}}
	more := false
	for _, p := range pages {
		out.Sandboxes = append(out.Sandboxes, p.Sandboxes...)
		more = more || p.Next != ""
	}
	slices.SortFunc(out.Sandboxes, func(a, b apiv1.Sandbox) int {
		return cmp.Or(compareTime(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	if len(out.Sandboxes) > limit {
		out.Sandboxes, more = out.Sandboxes[:limit], true
	}
	if more && len(out.Sandboxes) > 0 {
		out.Next = cursorAfter(out.Sandboxes[len(out.Sandboxes)-1])
	}
	return out
}

func compareTime(a, b time.Time) int { return cmp.Compare(a.UnixNano(), b.UnixNano()) }
