package api

import (
	"context"
	"strings"
	"testing"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// A sandbox's usage is live while it runs and settled once it ended, when
// its record carries it too; the report groups by tag; bad parameters
// are 400 naming the parameter.
func TestAPIUsage(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	sb := e.create(apiv1.CreateSandboxRequest{Name: "billed", Tags: map[string]string{"team": "blue"}})
	live, err := e.c.SandboxUsage(ctx, "billed")
	if err != nil || !live.Live || live.EndedAt != nil || live.SandboxID != sb.ID || live.DiskQuotaBytes == 0 {
		t.Fatalf("live usage: %+v, %v", live, err)
	}
	if got, _ := e.c.Get(ctx, sb.ID); got.Usage != nil {
		t.Errorf("a running sandbox's record has usage: %+v", got.Usage)
	}
	if _, err := e.c.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.c.Get(ctx, sb.ID)
	if err != nil || got.Usage == nil || got.Usage.CPUSeconds < live.CPUSeconds {
		t.Fatalf("the ended record's usage: %+v, %v", got, err)
	}
	settled, err := e.c.SandboxUsage(ctx, sb.ID)
	if err != nil || settled.Live || settled.EndedAt == nil || settled.Usage != *got.Usage {
		t.Errorf("settled usage %+v, %v; record's %+v", settled, err, got.Usage)
	}
	rep, err := e.c.Usage(ctx, corral.UsageOptions{GroupBy: "tag:team"})
	if err != nil || len(rep.Groups) != 1 || rep.Groups[0].Key != "blue" || rep.Groups[0].Sandboxes != 1 {
		t.Errorf("report by team: %+v, %v", rep, err)
	}
	for q, field := range map[string]string{"?group_by=color": "group_by", "?group_by=tag:": "group_by", "?from=yesterday": "from",
		"?to=-1": "to", "?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z": "to"} {
		if status, body := e.raw("GET", "/v1/usage"+q, ""); status != 400 || !strings.Contains(body, field) {
			t.Errorf("GET /v1/usage%s: %d %s", q, status, body)
		}
	}
	if status, _ := e.raw("GET", "/v1/sandboxes/sb-aaaaaaaaaaaaaaaa/usage", ""); status != 404 {
		t.Errorf("an unknown sandbox's usage: %d", status)
	}
}
