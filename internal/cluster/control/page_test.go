package control

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/internal/records"
	"corral/pkg/apiv1"
)

// The control plane's listing token is the node's: a merged page's token
// must start each node's next page where the merged one ended.
func TestCursorIsTheNodes(t *testing.T) {
	at := time.Date(2026, 12, 2, 22, 0, 0, 123456789, time.UTC)
	sb := apiv1.Sandbox{ID: "sb-abc123", CreatedAt: at}
	want := records.Cursor{CreatedAt: at, ID: sb.ID}.String()
	if got := cursorAfter(sb); got != want {
		t.Fatalf("cursorAfter = %q, the node's cursor is %q", got, want)
	}
	if !validCursor(want) {
		t.Fatalf("a node's cursor %q does not read as one", want)
	}
	parsed, err := records.ParseCursor("next", cursorAfter(sb))
	if err != nil || !parsed.CreatedAt.Equal(at) || parsed.ID != sb.ID {
		t.Fatalf("the node reads the control's cursor as %+v, %v", parsed, err)
	}
}

func TestReadListPage(t *testing.T) {
	good := records.Cursor{CreatedAt: time.Unix(1, 5), ID: "sb-x"}.String()
	for _, tc := range []struct {
		query, bad string
		limit      int
	}{
		{query: "", limit: maxListLimit},
		{query: "limit=7&next=" + good, limit: 7},
		{query: "limit=0", bad: "limit"},
		{query: "limit=1001", bad: "limit"},
		{query: "limit=x", bad: "limit"},
		{query: "next=%21%21", bad: "next"},
		{query: "next=" + strings.Repeat("A", 200), bad: "next"},
	} {
		q, _ := url.ParseQuery(tc.query)
		p, err := readListPage(q)
		switch {
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%q: %v, want an error naming %s", tc.query, err, tc.bad)
		case tc.bad == "" && (err != nil || p.limit != tc.limit):
			t.Errorf("%q: %+v, %v; want limit %d", tc.query, p, err, tc.limit)
		}
	}
}

// fakeNodeList answers a node's list as the node does: the sandboxes
// after the token's position, in order, at most limit, and a token when
// more follow.
func fakeNodeList(t *testing.T, all []apiv1.Sandbox, next string, limit int) apiv1.SandboxList {
	after, err := records.ParseCursor("next", next)
	if err != nil {
		t.Fatal(err)
	}
	var out apiv1.SandboxList
	for _, sb := range all {
		if next != "" && (sb.CreatedAt.Before(after.CreatedAt) || sb.CreatedAt.Equal(after.CreatedAt) && sb.ID <= after.ID) {
			continue
		}
		if len(out.Sandboxes) == limit {
			out.Next = cursorAfter(out.Sandboxes[limit-1])
			break
		}
		out.Sandboxes = append(out.Sandboxes, sb)
	}
	return out
}

// Paging through merged lists of three nodes, whose sandboxes interleave
// in time (some at the same instant on two nodes), gives every sandbox
// once, in (creation time, id) order, whatever the page size; a sandbox
// created on a node between two pages, after the position, comes on a
// later page.
func TestMergePages(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	nodes := make([][]apiv1.Sandbox, 3)
	for i := range 40 {
		n := i % 3
		at := base.Add(time.Duration(i/2) * time.Millisecond) // pairs share an instant
		sb := apiv1.Sandbox{ID: fmt.Sprintf("sb-%02d-n%d", 40-i, n), CreatedAt: at}
		nodes[n] = append(nodes[n], sb)
	}
	for _, l := range nodes {
		slices.SortFunc(l, func(a, b apiv1.Sandbox) int {
			return cmp.Or(compareTime(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
		})
	}
	for _, limit := range []int{1, 3, 7, 40, 1000} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			ns := [][]apiv1.Sandbox{slices.Clone(nodes[0]), slices.Clone(nodes[1]), slices.Clone(nodes[2])}
			var got []apiv1.Sandbox
			next, late := "", false
			for {
				var per []apiv1.SandboxList
				for _, l := range ns {
					per = append(per, fakeNodeList(t, l, next, limit))
				}
				page := merge(per, limit)
				if len(page.Sandboxes) > limit {
					t.Fatalf("a page of %d with limit %d", len(page.Sandboxes), limit)
				}
				got = append(got, page.Sandboxes...)
				if page.Next == "" {
					break
				}
				next = page.Next
				if !late {
					// Created meanwhile, after every position so far.
					ns[1] = append(ns[1], apiv1.Sandbox{ID: "sb-late", CreatedAt: base.Add(time.Hour)})
					late = true
				}
			}
			var want []string
			for _, l := range nodes {
				for _, sb := range l {
					want = append(want, sb.ID)
				}
			}
			if late {
				want = append(want, "sb-late")
			}
			var ids []string
			for i, sb := range got {
				ids = append(ids, sb.ID)
				if i > 0 && (compareTime(got[i-1].CreatedAt, sb.CreatedAt) > 0 ||
					got[i-1].CreatedAt.Equal(sb.CreatedAt) && got[i-1].ID >= sb.ID) {
					t.Fatalf("out of order at %d: %s then %s", i, got[i-1].ID, sb.ID)
				}
			}
			slices.Sort(ids)
			slices.Sort(want)
			if !slices.Equal(ids, want) {
				t.Fatalf("paged %d sandboxes:\n%v\nwant %d:\n%v", len(ids), ids, len(want), want)
			}
		})
	}
}

// A page merged from nodes with nothing more has no token; a node with
// more gives one even when the merged page is short of the limit.
func TestMergeNext(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	a := apiv1.Sandbox{ID: "sb-a", CreatedAt: at}
	b := apiv1.Sandbox{ID: "sb-b", CreatedAt: at.Add(time.Second)}
	if p := merge([]apiv1.SandboxList{{Sandboxes: []apiv1.Sandbox{a}}, {Sandboxes: []apiv1.Sandbox{b}}}, 5); p.Next != "" || len(p.Sandboxes) != 2 {
		t.Fatalf("the last page: %+v", p)
	}
	p := merge([]apiv1.SandboxList{{Sandboxes: []apiv1.Sandbox{b}, Next: "x"}, {Sandboxes: []apiv1.Sandbox{a}}}, 5)
	if p.Next != cursorAfter(b) || p.Sandboxes[0].ID != "sb-a" {
		t.Fatalf("a node with more: %+v", p)
	}
	if p := merge(nil, 5); p.Sandboxes == nil || p.Next != "" {
		t.Fatalf("no node: %+v", p)
	}
}
