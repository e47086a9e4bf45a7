package control

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/internal/audit"
	"corral/internal/cluster/store"
	"corral/internal/usage"
	"corral/pkg/apiv1"
)

// chainOf is a node's trail of n entries, hashed as the node hashes them.
func chainOf(n int) []store.AuditEntry {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 987654321, time.UTC)
	prev := audit.Genesis
	var out []store.AuditEntry
	for i := range n {
		e := audit.Entry{Seq: int64(i + 1), Time: t0.Add(time.Duration(i) * time.Second), Kind: "exec", SandboxID: "sb-x",
			Caller: "token:abc", Fields: map[string]string{"cmd": fmt.Sprint(i)}, PrevHash: prev}
		if i == 0 {
			e.Kind, e.SandboxID, e.Fields = "api", "", nil
		}
		e.Hash = audit.Hash(prev, e)
		prev = e.Hash
		out = append(out, store.AuditEntry{Seq: e.Seq, Time: e.Time, Kind: e.Kind, SandboxID: e.SandboxID, Caller: e.Caller,
			Fields: e.Fields, PrevHash: e.PrevHash, Hash: e.Hash})
	}
	return out
}

// Through a control plane, the trail and the usage come from the
// database, whether the nodes answer or not: pages by 4 give every
// shipped entry once, naming its node; verify walks each node's chain and
// names the first entry of a row edited in the database; export is node
// by node; usage adds up the shipped records, a sandbox's on two nodes
// as one.
func TestAuditAndUsageFromTheDatabase(t *testing.T) {
	st, _, dbURL := setup(t)
	ctx := context.Background()
	if err := st.Register(ctx, store.Node{ID: "n2", Address: "http://127.0.0.1:1", CPUMilli: 1000, MemoryMB: 1024, DiskMB: 1024,
		MaxSandboxes: 1, Runtimes: []string{"gvisor"}, CredentialNonce: "x", CredentialHash: "y"}); err != nil {
		t.Fatal(err)
	}
	for node, n := range map[string]int{"n1": 5, "n2": 3} {
		if err := st.ShipAudit(ctx, node, chainOf(n)); err != nil {
			t.Fatal(err)
		}
	}
	srv := controlFor(t, st, testJoin)

	seen := map[string]int{}
	pages := 0
	for after := ""; ; pages++ {
		status, body := call(t, srv, "GET", "/v1/audit?limit=4&after="+url.QueryEscape(after), testToken, "")
		var page apiv1.NodeAuditPage
		if err := json.Unmarshal([]byte(body), &page); status != 200 || err != nil {
			t.Fatalf("audit page: %d %s", status, body)
		}
		for _, e := range page.Entries {
			seen[fmt.Sprintf("%s/%d", e.Node, e.Seq)]++
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if len(seen) != 8 || pages != 2 {
		t.Fatalf("paged %d entries in %d pages: %v; want 8 in 2", len(seen), pages+1, seen)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("entry %s seen %d times", k, n)
		}
	}
	if status, body := call(t, srv, "GET", "/v1/audit?sandbox=sb-x&kind=exec&limit=100", testToken, ""); status != 200 || strings.Count(body, `"seq"`) != 6 {
		t.Errorf("sb-x's execs: %d %s; want 6 entries", status, body)
	}
	for _, bad := range []string{"after=12", "after=c2.x", "after=c2.5", "after=c2.-1.3", "kind=nope", "limit=0", "since=yesterday"} {
		if status, body := call(t, srv, "GET", "/v1/audit?"+bad, testToken, ""); status != 400 || !strings.Contains(body, strings.Split(bad, "=")[0]) {
			t.Errorf("GET /v1/audit?%s: %d %s; want a 400 naming the parameter", bad, status, body)
		}
	}

	verify := func() apiv1.AuditReport {
		t.Helper()
		status, body := call(t, srv, "GET", "/v1/audit/verify", testToken, "")
		var rep apiv1.AuditReport
		if err := json.Unmarshal([]byte(body), &rep); status != 200 || err != nil {
			t.Fatalf("verify: %d %s", status, body)
		}
		return rep
	}
	if rep := verify(); !rep.OK || rep.Entries != 8 || len(rep.Nodes) != 2 || rep.Nodes["n1"].Head != chainOf(5)[4].Hash {
		t.Fatalf("verify of whole chains: %+v", rep)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE audit_entries SET fields = '{"cmd": "rm -rf /"}' WHERE node_id = 'n2' AND seq = 2`); err != nil {
		t.Fatal(err)
	}
	rep := verify()
	if b := rep.Broken; rep.OK || b == nil || b.Seq != 2 || b.Problem != audit.Edited || !strings.HasPrefix(b.Detail, "node n2: ") {
		t.Fatalf("verify after an edit of n2's entry 2: %+v %+v", rep, b)
	}

	status, body := call(t, srv, "GET", "/v1/audit/export", testToken, "")
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if status != 200 || len(lines) != 8 || !strings.Contains(lines[0], `"node":"n1"`) || !strings.Contains(lines[7], `"node":"n2"`) {
		t.Fatalf("export: %d\n%s", status, body)
	}

	now := time.Now().UTC()
	if err := st.ShipUsage(ctx, "n1", []usage.Record{
		{SandboxID: "sb-a", Runtime: "gvisor", StartedAt: now.Add(-time.Hour), EndedAt: now.Add(-time.Minute), Totals: usage.Totals{CPUSeconds: 2}},
		{SandboxID: "sb-b", Runtime: "gvisor", StartedAt: now.Add(-time.Minute), Totals: usage.Totals{CPUSeconds: 3}},
	}); err != nil {
		t.Fatal(err)
	}
	// sb-c ran on n2, then (moved by a drain) lives on n1: one sandbox.
	if err := st.ShipUsage(ctx, "n2", []usage.Record{{SandboxID: "sb-c", Runtime: "vm", StartedAt: now.Add(-time.Minute),
		EndedAt: now.Add(-time.Second), Totals: usage.Totals{CPUSeconds: 1, MemoryPeakBytes: 7}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.ShipUsage(ctx, "n1", []usage.Record{{SandboxID: "sb-c", Runtime: "vm", StartedAt: now, Totals: usage.Totals{CPUSeconds: 4, MemoryPeakBytes: 3}}}); err != nil {
		t.Fatal(err)
	}
	status, body = call(t, srv, "GET", "/v1/usage?group_by=runtime", testToken, "")
	var ur apiv1.UsageReport
	if err := json.Unmarshal([]byte(body), &ur); status != 200 || err != nil || len(ur.Groups) != 2 ||
		ur.Groups[0].Key != "gvisor" || ur.Groups[0].Sandboxes != 2 || ur.Groups[0].CPUSeconds != 5 ||
		ur.Groups[1].Key != "vm" || ur.Groups[1].Sandboxes != 1 || ur.Groups[1].CPUSeconds != 5 || ur.Groups[1].MemoryPeakBytes != 7 {
		t.Fatalf("usage by runtime: %d %s", status, body)
	}
	for _, bad := range []string{"group_by=colour", "from=soon", "from=2026-12-03T00:00:00Z&to=2026-12-02T00:00:00Z"} {
		if status, body := call(t, srv, "GET", "/v1/usage?"+bad, testToken, ""); status != 400 {
			t.Errorf("GET /v1/usage?%s: %d %s; want 400", bad, status, body)
		}
	}
}

// The cluster's verify is every node's: a broken chain makes it not OK,
// naming the node.
func TestSumAudit(t *testing.T) {
	ok := map[string]apiv1.AuditReport{"n1": {OK: true, Entries: 3}, "n2": {OK: true, Entries: 4}}
	if r := sumAudit(ok); !r.OK || r.Entries != 7 || r.Broken != nil || len(r.Nodes) != 2 {
		t.Errorf("all whole: %+v", r)
	}
	broken := map[string]apiv1.AuditReport{"n1": {OK: true, Entries: 3},
		"n2": {Entries: 4, Broken: &apiv1.AuditBreak{Seq: 2, Problem: "edited", Detail: "hash differs"}}}
	if r := sumAudit(broken); r.OK || r.Broken == nil || r.Broken.Seq != 2 || !strings.HasPrefix(r.Broken.Detail, "node n2: ") {
		t.Errorf("n2 broken: %+v %+v", r, r.Broken)
	}
}
