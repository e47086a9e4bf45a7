package scalebench

import (
	"context"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/cluster/pgtest"
	"corral/internal/cluster/store"
)

// The full benchmark runs by hand (scripts/bench-cluster.sh passes these);
// without them the test is the short mode, seconds long, that proves the
// benchmark works.
var (
	flagNodes     = flag.String("scale.nodes", "", "node counts to measure, comma-separated (empty: the short mode)")
	flagRecords   = flag.Int("scale.records", 1_000_000, "sandbox records pre-loaded")
	flagLive      = flag.Int("scale.live", 50, "of them, live (placed) per node")
	flagControls  = flag.String("scale.controls", "0,2,8", "control instances, comma-separated (0: the heartbeats alone)")
	flagPlacers   = flag.Int("scale.placers", 4, "creates at once per control instance")
	flagDuration  = flag.Duration("scale.duration", 15*time.Second, "each measurement's length")
	flagHeartbeat = flag.Duration("scale.heartbeat", 5*time.Second, "each node's heartbeat interval (0: none)")
	flagNodePools = flag.Int("scale.nodepools", 4, "pools the simulated nodes share")
	flagShipEvery = flag.Duration("scale.shipevery", time.Second, "each node's interval between shipments of new audit entries (0: no shipping)")
	flagLiveEvery = flag.Duration("scale.liveevery", time.Minute, "each node's interval between shipments of its live sandboxes' running usage (0: none)")
	flagLiveNew   = flag.Bool("scale.livenew", true, "ship a new sandbox's first running usage at its node's next shipment")
)

func TestScale(t *testing.T) {
	url := pgtest.Start(t, "shared_preload_libraries=pg_stat_statements", "max_connections=300")
	ctx := context.Background()
	if *flagNodes == "" {
		short(t, ctx, url)
		return
	}
	for _, nodes := range ints(t, *flagNodes, 1) {
		c, err := Load(ctx, url, nodes, *flagRecords, *flagLive, *flagNodePools)
		if err != nil {
			t.Fatal(err)
		}
		for _, ctrls := range ints(t, *flagControls, 0) {
			r, err := c.Run(ctx, Config{URL: url, Nodes: nodes, Records: *flagRecords, LivePerNode: *flagLive, Controls: ctrls,
				Placers: *flagPlacers, Duration: *flagDuration, Heartbeat: *flagHeartbeat, NodePools: *flagNodePools,
				ShipEvery: *flagShipEvery, LiveEvery: *flagLiveEvery, LiveNew: *flagLiveNew})
			if err != nil {
				c.Close()
				t.Fatal(err)
			}
			r.Write(os.Stdout)
		}
		c.Close()
	}
}

// short runs the benchmark small and checks what it did: every create
// placed is recorded on its node with its public record, the heartbeats
// (which end placements a node no longer lists) ended none, the nodes
// shipped two audit entries per create and the running usage of every
// pre-loaded sandbox, the statements were measured.
func short(t *testing.T, ctx context.Context, url string) {
	const nodes, records, live = 20, 2000, 5
	c, err := Load(ctx, url, nodes, records, live, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Run(ctx, Config{URL: url, Nodes: nodes, Records: records, LivePerNode: live, Controls: 2, Placers: 2,
		Duration: 2 * time.Second, Heartbeat: 200 * time.Millisecond, NodePools: 2,
		ShipEvery: 100 * time.Millisecond, LiveEvery: time.Second, LiveNew: true})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.Write(&b)
	t.Log("\n" + b.String())
	if r.Creates == 0 || r.Heartbeats == 0 || r.Exhausted != 0 || r.AuditShips.N == 0 || r.UsageShips.N == 0 {
		t.Fatalf("%d creates, %d heartbeats, %d without room, %d audit and %d usage shipments; want some, some, none, some, some",
			r.Creates, r.Heartbeats, r.Exhausted, r.AuditShips.N, r.UsageShips.N)
	}
	shipped(t, ctx, c, nodes*live, r.Creates)
	var placeSQL bool
	for _, s := range r.SQL {
		placeSQL = placeSQL || strings.HasPrefix(s.Label, "place: candidates")
	}
	if !placeSQL {
		t.Fatalf("pg_stat_statements did not show the candidate query: %+v", r.SQL)
	}
	s, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	uses, err := s.Uses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for id, u := range uses {
		total += u.Sandboxes
		if want := len(c.nodes[id].lives()); u.Sandboxes != want {
			t.Errorf("node %s has %d live placements, its simulated node runs %d", id, u.Sandboxes, want)
		}
	}
	if want := nodes*live + r.Creates; total != want {
		t.Fatalf("%d live placements; want %d pre-loaded and %d placed", total, nodes*live, r.Creates)
	}
}

// shipped checks what the nodes shipped: two audit entries per create,
// the creates' records bound (with their tags and state), the running
// usage of every sandbox (the nodes' final shipment included the new
// ones') and never a settled one.
func shipped(t *testing.T, ctx context.Context, c *Cluster, preloaded, creates int) {
	t.Helper()
	var entries, creations, records, tagged, usage, settled, preUsage int
	err := c.db.conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM audit_entries),
		(SELECT count(*) FROM audit_entries WHERE kind = 'create' AND sandbox_id LIKE 'sb-run-%'),
		(SELECT count(*) FROM placements WHERE id LIKE 'sb-run-%' AND record IS NOT NULL AND sandbox_state = 'running'),
		(SELECT count(*) FROM placements WHERE id LIKE 'sb-run-%' AND tags ? 'team'),
		(SELECT count(*) FROM usage_records),
		(SELECT count(*) FROM usage_records WHERE ended_at IS NOT NULL),
		(SELECT count(*) FROM usage_records WHERE sandbox_id LIKE 'sb-pre-%')`).
		Scan(&entries, &creations, &records, &tagged, &usage, &settled, &preUsage)
	if err != nil {
		t.Fatal(err)
	}
	if entries != 2*creates || creations != creates {
		t.Errorf("%d audit entries shipped, %d of them creates; want %d, %d", entries, creations, 2*creates, creates)
	}
	if records != creates || tagged != creates {
		t.Errorf("%d creates bound with a running record, %d with tags; want %d", records, tagged, creates)
	}
	if preUsage != preloaded || usage != preloaded+creates || settled != 0 {
		t.Errorf("usage records: %d of the %d pre-loaded sandboxes, %d in all (want %d), %d settled (want none)",
			preUsage, preloaded, usage, preloaded+creates, settled)
	}
}

// ints are the comma-separated integers in s, each at least least.
func ints(t *testing.T, s string, least int) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			t.Fatalf("%q: want integers of at least %d, comma-separated", s, least)
		}
		out = append(out, n)
	}
	return out
}
