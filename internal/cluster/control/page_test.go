package control

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"corral/internal/cluster/store"
	"corral/internal/records"
)

// The control plane's listing token is written and read as a node's: a
// caller cannot tell a control plane's list from a daemon's.
func TestCursorIsTheNodes(t *testing.T) {
	at := time.Date(2026, 12, 2, 22, 0, 0, 123456789, time.UTC)
	c := store.Cursor{CreatedNS: at.UnixNano(), ID: "sb-abc123"}
	want := records.Cursor{CreatedAt: at, ID: c.ID}.String()
	if got := cursorToken(c); got != want {
		t.Fatalf("cursorToken = %q, the node's cursor is %q", got, want)
	}
	if back, err := parseCursor(want); err != nil || back != c {
		t.Fatalf("a node's cursor %q reads as %+v, %v", want, back, err)
	}
	if cursorToken(store.Cursor{}) != "" {
		t.Fatal("the end of a list has a token")
	}
}

func TestReadListFilter(t *testing.T) {
	good := records.Cursor{CreatedAt: time.Unix(1, 5), ID: "sb-x"}.String()
	for _, tc := range []struct {
		query, bad string
		limit      int
		states     int
		tags       map[string]string
	}{
		{query: "", limit: maxListLimit},
		{query: "limit=7&next=" + good, limit: 7},
		{query: "state=running,paused&state=lost", limit: maxListLimit, states: 3},
		{query: "tag=team=a&tag=env", limit: maxListLimit, tags: map[string]string{"team": "a", "env": ""}},
		{query: "state=gone", bad: "state"},
		{query: "tag=bad%20key", bad: "tag"},
		{query: "tag=k=" + strings.Repeat("v", 257), bad: "tag"},
		{query: "limit=0", bad: "limit"},
		{query: "limit=1001", bad: "limit"},
		{query: "limit=x", bad: "limit"},
		{query: "next=%21%21", bad: "next"},
		{query: "next=" + strings.Repeat("A", 200), bad: "next"},
	} {
		q, _ := url.ParseQuery(tc.query)
		f, err := readListFilter(q)
		switch {
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%q: %v, want an error naming %s", tc.query, err, tc.bad)
		case tc.bad == "" && (err != nil || f.Limit != tc.limit || len(f.States) != tc.states || len(f.Tags) != len(tc.tags)):
			t.Errorf("%q: %+v, %v; want limit %d, %d states, tags %v", tc.query, f, err, tc.limit, tc.states, tc.tags)
		case tc.bad == "":
			for k, v := range tc.tags {
				if got, ok := f.Tags[k]; !ok || got != v {
					t.Errorf("%q: tag %s = %q, want %q", tc.query, k, got, v)
				}
			}
		}
	}
}
