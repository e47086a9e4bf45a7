package control

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// TestE2BSnapshotPage: a snapshot list is filtered by sandbox and name,
// sorted oldest first, paged by the last id, without Corral's own.
func TestE2BSnapshotPage(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	all := []apiv1.Snapshot{
		{ID: "snap-c", SandboxID: "sb-1", CreatedAt: t0.Add(3 * time.Second)},
		{ID: "snap-a", SandboxID: "sb-1", Name: "one", CreatedAt: t0.Add(time.Second)},
		{ID: "snap-b", SandboxID: "sb-2", CreatedAt: t0.Add(2 * time.Second)},
		{ID: "snap-d", SandboxID: "sb-1", Name: "corral.fork-1", CreatedAt: t0.Add(4 * time.Second)},
		{ID: "snap-e", SandboxID: "sb-1", CreatedAt: t0.Add(5 * time.Second)},
	}
	ids := func(p []e2bSnapshotInfo) string {
		var out []string
		for _, s := range p {
			out = append(out, s.SnapshotID)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct{ query, want, next string }{
		{"", "snap-a,snap-b,snap-c,snap-e", ""},
		{"sandboxID=sb-1", "snap-a,snap-c,snap-e", ""},
		{"sandboxID=sb-1&limit=2", "snap-a,snap-c", "snap-c"},
		{"sandboxID=sb-1&limit=2&nextToken=snap-c", "snap-e", ""},
		{"name=one", "snap-a", ""},
		{"sandboxID=sb-3", "", ""},
	} {
		q, _ := url.ParseQuery(c.query)
		f, err := parseE2BSnapshotQuery(q)
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		page, next, err := f.page(slices.Clone(all))
		if err != nil || ids(page) != c.want || next != c.next {
			t.Errorf("%s: %s next %q %v, want %s next %q", c.query, ids(page), next, err, c.want, c.next)
		}
	}
	if _, _, err := (e2bSnapshotQuery{after: "snap-gone", limit: 10}).page(all); err == nil || !strings.Contains(err.Error(), "nextToken") {
		t.Errorf("a token of no snapshot: %v, want an error naming nextToken", err)
	}
	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "state=running"} {
		q, _ := url.ParseQuery(bad)
		if _, err := parseE2BSnapshotQuery(q); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	// A snapshot with no name lists no names, not null.
	if b, _ := json.Marshal(e2bSnapshotOf("snap-x", "")); string(b) != `{"snapshotID":"snap-x","names":[]}` {
		t.Errorf("an unnamed snapshot: %s", b)
	}
}

// TestE2BSandboxOfDetail: a fork's copy is answered as a create answers,
// from the node's details of it.
func TestE2BSandboxOfDetail(t *testing.T) {
	detail := `{"sandboxID":"sb-1","templateID":"base","clientID":"corral","cpuCount":2,"memoryMB":512,"envdVersion":"0.2.0",
		"metadata":{"a":"b"},"state":"running","envdAccessToken":"tok","domain":null,"lifecycle":{"onTimeout":"kill"}}`
	got, err := e2bSandboxOfDetail([]byte(detail))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"sandboxID": "sb-1", "templateID": "base", "clientID": "corral", "envdVersion": "0.2.0",
		"envdAccessToken": "tok", "domain": nil, "trafficAccessToken": nil}
	if len(m) != len(want) {
		t.Errorf("got %v, want %v", m, want)
	}
	for k, v := range want {
		if mv, ok := m[k]; !ok || mv != v {
			t.Errorf("%s: %v, want %v", k, mv, v)
		}
	}
	if _, err := e2bSandboxOfDetail([]byte(`{"state":"running"}`)); err == nil {
		t.Error("details with no sandboxID were accepted")
	}
}
