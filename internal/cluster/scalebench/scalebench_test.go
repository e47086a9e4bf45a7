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
				Placers: *flagPlacers, Duration: *flagDuration, Heartbeat: *flagHeartbeat, NodePools: *flagNodePools})
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
// placed is recorded on its node, the heartbeats (which end placements a
// node no longer lists) ended none, the statements were measured.
func short(t *testing.T, ctx context.Context, url string) {
	const nodes, records, live = 20, 2000, 5
	c, err := Load(ctx, url, nodes, records, live, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Run(ctx, Config{URL: url, Nodes: nodes, Records: records, LivePerNode: live, Controls: 2, Placers: 2,
		Duration: 2 * time.Second, Heartbeat: 200 * time.Millisecond, NodePools: 2})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.Write(&b)
	t.Log("\n" + b.String())
	if r.Creates == 0 || r.Heartbeats == 0 || r.Exhausted != 0 {
		t.Fatalf("%d creates, %d heartbeats, %d without room; want some, some, none", r.Creates, r.Heartbeats, r.Exhausted)
	}
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
		if want := len(c.nodes[id].snapshot()); u.Sandboxes != want {
			t.Errorf("node %s has %d live placements, its simulated node runs %d", id, u.Sandboxes, want)
		}
	}
	if want := nodes*live + r.Creates; total != want {
		t.Fatalf("%d live placements; want %d pre-loaded and %d placed", total, nodes*live, r.Creates)
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
