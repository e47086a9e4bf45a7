package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/audit"
	"corral/pkg/apiv1"
)

// verifyFile checks an export in the order of its lines.
func TestAuditVerifyFile(t *testing.T) {
	var lines []string
	prev := audit.Genesis
	for i := int64(1); i <= 3; i++ {
		e := audit.Entry{Seq: i, Time: time.Unix(1700000000+i, 0).UTC(), Kind: "exec", PrevHash: prev,
			Fields: map[string]string{"argv": `["true"]`}}
		e.Hash = audit.Hash(prev, e)
		prev = e.Hash
		b, _ := json.Marshal(apiv1.AuditEntry(e))
		lines = append(lines, string(b))
	}
	write := func(ls []string) string {
		p := filepath.Join(t.TempDir(), "x.jsonl")
		if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rep, err := verifyFile(write(lines))
	if err != nil || !rep.OK || rep.Entries != 3 || rep.Head != prev {
		t.Fatalf("intact export: %+v %v", rep, err)
	}
	rep, err = verifyFile(write([]string{lines[0], lines[2], lines[1]}))
	if err != nil || rep.OK || rep.Broken.Seq != 2 || rep.Broken.Problem != audit.Reordered {
		t.Fatalf("reordered export: %+v %v", rep.Broken, err)
	}
	if _, err := verifyFile(write([]string{lines[0], "{not json"})); err == nil {
		t.Fatal("a line that is not JSON verified")
	}
	// A control plane's export: each node's chain in turn, each line
	// naming its node, verified node by node.
	var cluster []string
	for _, n := range []string{"n1", "n2"} {
		for _, l := range lines {
			cluster = append(cluster, `{"node":"`+n+`",`+l[1:])
		}
	}
	rep, err = verifyFile(write(cluster))
	if err != nil || !rep.OK || rep.Entries != 6 || len(rep.Nodes) != 2 {
		t.Fatalf("a control plane's export: %+v %v", rep, err)
	}
	cluster[4] = strings.Replace(cluster[4], `"exec"`, `"api"`, 1)
	rep, err = verifyFile(write(cluster))
	if err != nil || rep.OK || rep.Broken.Seq != 2 || !strings.HasPrefix(rep.Broken.Detail, "node n2: ") {
		t.Fatalf("a control plane's export with n2's entry 2 edited: %+v %v", rep.Broken, err)
	}
}
