package control

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// auditOf is a node's trail: n entries, seq 1.., at the given minutes.
func auditOf(minutes ...int) []apiv1.AuditEntry {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	var es []apiv1.AuditEntry
	for i, m := range minutes {
		es = append(es, apiv1.AuditEntry{Seq: int64(i + 1), Time: t0.Add(time.Duration(m) * time.Minute), Kind: "api"})
	}
	return es
}

// pageOf is a node's page of at most limit entries after seq.
func pageOf(trail []apiv1.AuditEntry, after int64, limit int) apiv1.AuditPage {
	var p apiv1.AuditPage
	for _, e := range trail {
		if e.Seq > after && len(p.Entries) < limit {
			p.Entries = append(p.Entries, e)
		}
	}
	if len(p.Entries) == limit {
		p.Next = fmt.Sprint(p.Entries[limit-1].Seq)
	}
	return p
}

// Paging through two nodes' trails by 2 gives every entry once, oldest
// first, each naming its node, and the last page no token.
func TestMergeAuditPages(t *testing.T) {
	trails := map[string][]apiv1.AuditEntry{"n1": auditOf(1, 4, 5, 9), "n2": auditOf(2, 3, 6)}
	after := map[string]int64{}
	var got []string
	for range 10 {
		pages := map[string]apiv1.AuditPage{}
		for n, tr := range trails {
			pages[n] = pageOf(tr, after[n], 2)
		}
		page := mergeAudit(pages, after, 2)
		for _, e := range page.Entries {
			got = append(got, fmt.Sprintf("%s/%d@%d", e.Node, e.Seq, e.Time.Minute()))
		}
		if page.Next == "" {
			break
		}
		var err error
		if after, err = readAuditToken(page.Next); err != nil {
			t.Fatalf("the next token %q: %v", page.Next, err)
		}
	}
	want := "n1/1@1 n2/1@2 n2/2@3 n1/2@4 n1/3@5 n2/3@6 n1/4@9"
	if strings.Join(got, " ") != want {
		t.Errorf("paged: %s\nwant:  %s", strings.Join(got, " "), want)
	}
}

func TestAuditToken(t *testing.T) {
	pos := map[string]int64{"n1": 7, "n2": 0}
	back, err := readAuditToken(writeAuditToken(pos))
	if err != nil || back["n1"] != 7 || len(back) != 2 {
		t.Errorf("round trip: %v %v", back, err)
	}
	for _, bad := range []string{"12", "c1.!!", "c1." + strings.Repeat("A", maxAuditToken), "c1.eyJuMSI6LTF9" /* {"n1":-1} */} {
		if _, err := readAuditToken(bad); err == nil || !strings.Contains(err.Error(), "after") {
			t.Errorf("token %.20q: %v, want an error naming after", bad, err)
		}
	}
}

// The cluster's verify is every node's: a broken chain or a silent node
// makes it not OK, naming the node.
func TestSumAudit(t *testing.T) {
	ok := map[string]apiv1.AuditReport{"n1": {OK: true, Entries: 3}, "n2": {OK: true, Entries: 4}}
	if r := sumAudit(ok, nil); !r.OK || r.Entries != 7 || r.Broken != nil || len(r.Nodes) != 2 {
		t.Errorf("all whole: %+v", r)
	}
	broken := map[string]apiv1.AuditReport{"n1": {OK: true, Entries: 3},
		"n2": {Entries: 4, Broken: &apiv1.AuditBreak{Seq: 2, Problem: "edited", Detail: "hash differs"}}}
	if r := sumAudit(broken, nil); r.OK || r.Broken == nil || r.Broken.Seq != 2 || !strings.HasPrefix(r.Broken.Detail, "node n2: ") {
		t.Errorf("n2 broken: %+v %+v", r, r.Broken)
	}
	if r := sumAudit(ok, map[string]error{"n3": errors.New("does not answer")}); r.OK || r.Broken == nil || !strings.Contains(r.Broken.Detail, "node n3") {
		t.Errorf("n3 silent: %+v", r)
	}
}
