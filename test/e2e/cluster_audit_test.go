package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// usageShipped reports whether the usage through control c lists every
// one of ids (grouped by sandbox).
func usageShipped(ctx context.Context, t *testing.T, c *controlPlane, ids []string) bool {
	t.Helper()
	rep, err := c.client.Usage(ctx, corral.UsageOptions{From: time.Now().Add(-time.Hour), GroupBy: "sandbox"})
	if err != nil {
		t.Fatalf("usage through a control: %v", err)
	}
	have := map[string]bool{}
	for _, g := range rep.Groups {
		have[g.Key] = g.RunningSeconds > 0
	}
	for _, id := range ids {
		if !have[id] {
			return false
		}
	}
	return true
}

// checkLostNodeRecords: node, killed -9 and lost, still has its
// sandboxes' (ids) usage and audit entries listed through control c, from
// the cluster database db; `corral audit verify` through c passes, and
// fails naming the entry once a row of the database's copy of node's
// trail is edited (then put back).
func checkLostNodeRecords(ctx context.Context, t *testing.T, c *controlPlane, token, db, node string, ids []string) {
	t.Helper()
	if !usageShipped(ctx, t, c, ids) {
		t.Errorf("the usage of lost node %s's sandboxes %v is not listed through a control", node, ids)
	}
	for _, id := range ids {
		status, body := viaCLI(t, c, token).api("GET", "/v1/audit?kind=create&sandbox="+url.QueryEscape(id), token, "")
		var page apiv1.NodeAuditPage
		if err := json.Unmarshal([]byte(body), &page); status != http.StatusOK || err != nil || len(page.Entries) == 0 ||
			slices.ContainsFunc(page.Entries, func(e apiv1.NodeAuditEntry) bool { return e.Node != node || e.SandboxID != id }) {
			t.Errorf("the create of %s on lost node %s through a control: %d %.500s", id, node, status, body)
		}
	}
	cli := viaCLI(t, c, token)
	cli.mustCLI("audit", "verify")

	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var seq int64
	if err := conn.QueryRow(ctx, `UPDATE audit_entries SET caller = caller || '-forged'
		WHERE node_id = $1 AND seq = (SELECT min(seq) + 1 FROM audit_entries WHERE node_id = $1) RETURNING seq`, node).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	out, errs, code := cli.cli("", "audit", "verify")
	if want := fmt.Sprintf("entry %d: edited: node %s: ", seq, node); code != 1 || !strings.Contains(errs, want) {
		t.Errorf("corral audit verify through a control after an edit of %s's entry %d: exit %d\n%s%s\nwant exit 1 and %q", node, seq, code, out, errs, want)
	}
	if _, err := conn.Exec(ctx, `UPDATE audit_entries SET caller = left(caller, -7) WHERE node_id = $1 AND seq = $2`, node, seq); err != nil {
		t.Fatal(err)
	}
	cli.mustCLI("audit", "verify")
}
