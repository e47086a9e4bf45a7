package api

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// PATCH moves a running sandbox's end either way (extend-only never
// earlier), merges its tags, and the sandbox ends at its new end.
func TestAPIUpdate(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	sb := e.create(apiv1.CreateSandboxRequest{Name: "upd", Timeout: 3600, Tags: map[string]string{"a": "1", "b": "2"}})
	got, err := e.c.SetTimeout(ctx, sb.ID, 10*time.Minute, true)
	if err != nil || !got.ExpiresAt.Equal(*sb.ExpiresAt) {
		t.Fatalf("extend-only to 10 minutes of an hour's sandbox: %v -> %v, %v", sb.ExpiresAt, got.ExpiresAt, err)
	}
	got, err = e.c.SetTimeout(ctx, "upd", 2*time.Hour, true)
	if err != nil || time.Until(*got.ExpiresAt) < 119*time.Minute || got.Timeout != 3600 {
		t.Fatalf("extended by name: %+v, %v", got, err)
	}
	nine := "9"
	got, err = e.c.SetTags(ctx, sb.ID, map[string]*string{"a": &nine, "b": nil})
	if err != nil || len(got.Tags) != 1 || got.Tags["a"] != "9" {
		t.Fatalf("tags: %v, %v", got.Tags, err)
	}
	if status, body := e.raw("PATCH", "/v1/sandboxes/upd", `{"tags": {"c": "3", "a": null}}`); status != 200 || !strings.Contains(body, `"c":"3"`) || strings.Contains(body, `"a":`) {
		t.Fatalf("merge patch: %d %s", status, body)
	}
	t0 := time.Now()
	if _, err := e.c.SetTimeout(ctx, sb.ID, time.Second, false); err != nil {
		t.Fatal(err)
	}
	w, err := e.c.Wait(ctx, sb.ID, 20)
	if err != nil || w.EndReason != "timeout" || w.ExitCode != 124 || time.Since(t0) > 15*time.Second {
		t.Fatalf("after shortening to 1 s: %+v %v (%s)", w, err, time.Since(t0))
	}
	if status, body := e.raw("PATCH", "/v1/sandboxes/"+sb.ID, `{"timeout": 60}`); status != 409 || !strings.Contains(body, "failed_precondition") {
		t.Errorf("an ended sandbox: %d %s", status, body)
	}
}

// Bad updates are 4xx naming the field, and change nothing.
func TestAPIUpdateBadInput(t *testing.T) {
	e := newAPIEnv(t)
	sb := e.create(apiv1.CreateSandboxRequest{Tags: map[string]string{"keep": "1"}})
	p := "/v1/sandboxes/" + sb.ID
	for _, tt := range []struct{ body, want string }{
		{`{}`, "nothing to update"},
		{`{"timeout": -1}`, "timeout"},
		{`{"timeout": 1e12}`, "timeout"},
		{`{"timeout": "soon"}`, "timeout"},
		{`{"extend_only": true}`, "extend_only"},
		{`{"tags": {"corral.pool": "x"}}`, "corral."},
		{`{"tags": {"bad key": "x"}}`, "tags"},
		{`{"tags": {"k": 5}}`, "tags"},
		{`{"name": "x"}`, "name"},
	} {
		status, body := e.raw("PATCH", p, tt.body)
		if status != 400 || !strings.Contains(body, tt.want) {
			t.Errorf("PATCH %s: %d %s, want 400 naming %s", tt.body, status, body, tt.want)
		}
	}
	if got, err := e.c.Get(context.Background(), sb.ID); err != nil || len(got.Tags) != 1 || got.Timeout != sb.Timeout || !got.ExpiresAt.Equal(*sb.ExpiresAt) {
		t.Errorf("after bad updates: %+v, %v", got, err)
	}
	if status, body := e.raw("PATCH", "/v1/sandboxes/nobody", `{"timeout": 5}`); status != 404 || !strings.Contains(body, "nobody") {
		t.Errorf("unknown name: %d %s", status, body)
	}
}

// A name works wherever an id does; a second live sandbox cannot take it.
func TestAPINames(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	sb := e.create(apiv1.CreateSandboxRequest{Name: "named"})
	if out, code := e.run("named", apiv1.ExecRequest{Cmd: []string{"echo", "by name"}}); out != "by name\n" || code != 0 {
		t.Fatalf("exec by name: %q %d", out, code)
	}
	if got, err := e.c.Get(ctx, "named"); err != nil || got.ID != sb.ID {
		t.Fatalf("get by name: %+v, %v", got, err)
	}
	if _, err := e.c.Create(ctx, apiv1.CreateSandboxRequest{Name: "named", User: e.user}); !isCode(err, "already_exists") {
		t.Fatalf("a second sandbox named named: %v", err)
	}
	if _, err := e.c.Create(ctx, apiv1.CreateSandboxRequest{Name: "sb-abcdefghijklmnop", User: e.user}); !isCode(err, "invalid_argument") {
		t.Fatalf("a name shaped like an id: %v", err)
	}
	if _, err := e.c.Terminate(ctx, "named"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.c.Get(ctx, "named"); err != nil || got.State != "terminated" {
		t.Fatalf("an ended sandbox by name: %+v, %v", got, err)
	}
}

// The list filters by state and tags and pages with a cursor that holds
// while sandboxes come and go.
func TestAPIListFilters(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	var team []string
	for i := range 5 {
		sb := e.create(apiv1.CreateSandboxRequest{Tags: map[string]string{"team": "a", "n": fmt.Sprint(i)}})
		team = append(team, sb.ID)
	}
	other := e.create(apiv1.CreateSandboxRequest{Tags: map[string]string{"team": "b"}})
	if _, err := e.c.Terminate(ctx, team[1]); err != nil {
		t.Fatal(err)
	}
	page, err := e.c.ListPage(ctx, corral.ListOptions{Tags: map[string]string{"team": "a"}, States: []string{"running"}, Limit: 2})
	if err != nil || len(page.Sandboxes) != 2 || page.Sandboxes[0].ID != team[0] || page.Sandboxes[1].ID != team[2] || page.Next == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	if _, err := e.c.Terminate(ctx, team[3]); err != nil { // gone before the next page
		t.Fatal(err)
	}
	page, err = e.c.ListPage(ctx, corral.ListOptions{Tags: map[string]string{"team": "a"}, States: []string{"running"}, Limit: 2, Next: page.Next})
	if err != nil || len(page.Sandboxes) != 1 || page.Sandboxes[0].ID != team[4] || page.Next != "" {
		t.Fatalf("second page: %+v, %v", page, err)
	}
	all, err := e.c.ListAll(ctx, corral.ListOptions{Tags: map[string]string{"n": ""}, Limit: 1})
	if err != nil || len(all) != 5 {
		t.Fatalf("tag key only, one by one: %d, %v", len(all), err)
	}
	ended, err := e.c.ListAll(ctx, corral.ListOptions{States: []string{"terminated", "failed"}})
	if err != nil || len(ended) != 2 {
		t.Fatalf("ended: %d, %v", len(ended), err)
	}
	if status, body := e.raw("GET", "/v1/sandboxes?state=running,paused&tag=team=b", ""); status != 200 || !strings.Contains(body, other.ID) || strings.Contains(body, team[0]) {
		t.Errorf("comma-separated states and a tag: %d %s", status, body)
	}
	for _, q := range []string{"state=sleepy", "tag=bad%20key", "limit=0", "limit=1001", "limit=x", "next=garbage!", "tag=" + strings.Repeat("k", 100)} {
		if status, body := e.raw("GET", "/v1/sandboxes?"+q, ""); status != 400 || !strings.Contains(body, strings.SplitN(q, "=", 2)[0]) {
			t.Errorf("GET ?%s: %d %s", q, status, body)
		}
	}
}
