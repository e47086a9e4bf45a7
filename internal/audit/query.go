package audit

import (
	"context"

	"corral/internal/records"
)

// Filter selects entries of the trail (records.AuditFilter).
type Filter = records.AuditFilter

// MaxPage bounds one page of Query.
const MaxPage = 1000

// Query returns the entries f selects, oldest first, once everything
// recorded before the call is committed.
func (t *Trail) Query(ctx context.Context, f Filter) ([]Entry, error) {
	if err := t.Flush(ctx); err != nil {
		return nil, err
	}
	f.Limit = min(max(f.Limit, 1), MaxPage)
	return t.st.QueryAudit(ctx, f, false)
}

// Walk calls fn with every entry of the trail, in stored order, a page at
// a time; it stops at fn's first error.
func (t *Trail) Walk(ctx context.Context, fn func(Entry) error) error {
	if err := t.Flush(ctx); err != nil {
		return err
	}
	var after int64
	for {
		page, err := t.st.QueryAudit(ctx, Filter{After: after, Limit: MaxPage}, false)
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return err
			}
			after = e.Seq
		}
		if len(page) < MaxPage {
			return nil
		}
	}
}

// Report is what verifying a trail found.
type Report struct {
	// Entries is how many entries were walked.
	Entries int64 `json:"entries"`
	// Head is the last entry's hash: recorded elsewhere, it lets a later
	// verify show that nothing was cut from the end.
	Head string `json:"head"`
	// Broken is the first entry that does not verify; nil when all do.
	Broken *Break `json:"broken,omitempty"`
}

// Verify walks the whole trail.
func (t *Trail) Verify(ctx context.Context) (Report, error) {
	var v Verifier
	if err := t.Walk(ctx, func(e Entry) error { v.Add(e); return nil }); err != nil {
		return Report{}, err
	}
	b, n, head := v.Result()
	return Report{Entries: n, Head: head, Broken: b}, nil
}
