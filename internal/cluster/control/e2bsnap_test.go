package control

import (
	"context"
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

// TestE2BSnapshotsThroughControl: E2B's snapshot taken through a control
// plane is the cluster's (listed, sent to the node a create from it is
// placed on, deleted on every node that holds it); a fork's copies are
// answered as creates, each given the timeout asked for.
func TestE2BSnapshotsThroughControl(t *testing.T) {
	st, a, b := twoSnapNodes(t)
	srv := controlFor(t, st, testJoin)
	key := e2bKeyPrefix + testToken
	parent := placeOn(t, srv, "a", "b")

	resp, body := e2bCall(t, srv, "POST", "/e2b/sandboxes/"+parent+"/snapshots", key, `{"name":"mine"}`)
	var info e2bSnapshotInfo
	if err := json.Unmarshal([]byte(body), &info); resp.StatusCode != 201 || err != nil || info.SnapshotID == "" || !slices.Equal(info.Names, []string{"mine"}) {
		t.Fatalf("snapshot: %d %s", resp.StatusCode, body)
	}
	resp, body = e2bCall(t, srv, "GET", "/e2b/snapshots?sandboxID="+parent, key, "")
	if want := `[{"snapshotID":"` + info.SnapshotID + `","names":["mine"]}]`; resp.StatusCode != 200 || strings.TrimSpace(body) != want {
		t.Fatalf("list: %d %s, want %s", resp.StatusCode, body, want)
	}
	if _, body := e2bCall(t, srv, "GET", "/e2b/snapshots?sandboxID=sb-other", key, ""); strings.TrimSpace(body) != "[]" {
		t.Fatalf("another sandbox's list: %s", body)
	}

	// By name, with a drained: placed on b, which is sent the snapshot
	// first, and whose E2B face gets the body as it came.
	call(t, srv, "POST", "/v1/cluster/nodes/a/drain", testToken, "")
	create := `{"templateID":"mine","timeout":30}`
	if resp, body := e2bCall(t, srv, "POST", "/e2b/v2/sandboxes", key, create); resp.StatusCode != 201 {
		t.Fatalf("a create from the snapshot: %d %s", resp.StatusCode, body)
	}
	call(t, srv, "POST", "/v1/cluster/nodes/a/undrain", testToken, "")
	if !b.snaps["imported"] || !slices.Equal(b.e2bCreates, []string{create}) {
		t.Fatalf("b imported the snapshot: %v; its E2B face got %q", b.snaps["imported"], b.e2bCreates)
	}
	if ls, err := st.SnapshotLocations(context.Background(), info.SnapshotID); err != nil || len(ls) != 2 {
		t.Fatalf("the snapshot's locations: %+v, %v; want a and b", ls, err)
	}

	// A fork: each copy given its timeout, answered as a create.
	resp, body = e2bCall(t, srv, "POST", "/e2b/sandboxes/"+parent+"/fork", key, `{"count":2,"timeout":60}`)
	var res []struct {
		Sandbox map[string]any
		Error   *e2bErrorBody
	}
	if err := json.Unmarshal([]byte(body), &res); resp.StatusCode != 201 || err != nil || len(res) != 2 {
		t.Fatalf("fork: %d %s", resp.StatusCode, body)
	}
	for _, r := range res {
		id, _ := r.Sandbox["sandboxID"].(string)
		if r.Error != nil || id == "" || r.Sandbox["envdAccessToken"] != "tok-"+id || r.Sandbox["templateID"] != "base" {
			t.Errorf("a fork's result: %+v", r)
		}
	}
	if got := append(slices.Clone(a.timeouts), b.timeouts...); len(got) != 2 || got[0] != `{"timeout":60}` || got[1] != `{"timeout":60}` {
		t.Errorf("the copies' timeouts: %q", got)
	}
	// A fork of an unknown sandbox is a 404 naming it, no results.
	if resp, body := e2bCall(t, srv, "POST", "/e2b/sandboxes/sb-nosuch/fork", key, `{}`); resp.StatusCode != 404 || !strings.Contains(body, "sb-nosuch") {
		t.Errorf("a fork of an unknown sandbox: %d %s", resp.StatusCode, body)
	}

	// Deleted by id: on both nodes, then unknown.
	a.deletedSnaps, b.deletedSnaps = nil, nil
	if resp, body := e2bCall(t, srv, "DELETE", "/e2b/templates/"+info.SnapshotID, key, ""); resp.StatusCode != 204 {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	if !slices.Contains(a.deletedSnaps, info.SnapshotID) || !slices.Contains(b.deletedSnaps, info.SnapshotID) {
		t.Errorf("deleted on a %v, b %v; want both", a.deletedSnaps, b.deletedSnaps)
	}
	if resp, body := e2bCall(t, srv, "DELETE", "/e2b/templates/"+info.SnapshotID, key, ""); resp.StatusCode != 404 || !strings.Contains(body, info.SnapshotID) {
		t.Errorf("a second delete: %d %s, want 404 naming it", resp.StatusCode, body)
	}
	if _, body := e2bCall(t, srv, "GET", "/e2b/snapshots", key, ""); strings.TrimSpace(body) != "[]" {
		t.Errorf("the list after the delete: %s", body)
	}
}
