// Package scalebench measures the cluster's control plane past one
// machine, in simulation: the real placement code (store.Reserve and
// store.Bind, as a control instance's create runs them) against a real
// PostgreSQL, with simulated nodes (registered rows whose goroutines
// heartbeat with the ids they run) and a fake runtime (a placement bound
// is a sandbox; nothing runs). Sandbox records are pre-loaded with COPY.
// It reports creates placed per second, placement latency, the
// database's share of it and the heartbeats' write load. The figures are
// in docs/SCALING.md; scripts/bench-cluster.sh runs it.
//
// It imports the cluster's store only.
package scalebench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"corral/internal/cluster/store"
	"corral/internal/usage"
)

// Config is one measurement.
type Config struct {
	URL string // the database (pg_stat_statements loaded, for the statement figures)
	// Nodes registered; Records sandbox records pre-loaded, LivePerNode of
	// them placed on each node (the rest ended).
	Nodes, Records, LivePerNode int
	// Controls is the number of control instances, each its own
	// store.Open (its own pool of connections); Placers the creates each
	// runs at once. No controls: the heartbeats alone, for Duration.
	Controls, Placers int
	Duration          time.Duration
	// Heartbeat is each node's interval (0: no heartbeats), NodePools the
	// pools the simulated nodes share (a real node has its own).
	Heartbeat time.Duration
	NodePools int
	// ShipEvery is each node's interval between shipments of its new audit
	// entries and settled usage (0: the nodes ship nothing); LiveEvery the
	// interval between shipments of every live sandbox's running figures
	// (0: never), both as internal/cluster/node's.
	ShipEvery, LiveEvery time.Duration
	// LiveNew ships a new sandbox's first running figures at its node's
	// next shipment, not at the next of every live sandbox's (as
	// internal/cluster/node's does since its liveEvery is a minute).
	LiveNew bool
}

// Node capacity and the request each create makes: a node holds 1,000
// such sandboxes (its slots; CPU and memory hold more), far more than a
// run places, so creates never run out of room.
const (
	nodeCPUMilli = 256000
	nodeMemoryMB = 1 << 20
	nodeDiskMB   = 2 << 20
	nodeSlots    = 1000
	reqCPUMilli  = 250
	reqMemoryMB  = 512
	reqDiskMB    = 1024
	runtimeName  = "gvisor"
	// placedGrace is the nodes' grace in their heartbeats (as
	// internal/cluster/node's).
	placedGrace = 30 * time.Second
)

// request is one create's ask; FreshWithin as a control plane's default
// --node-lost-after.
var request = store.Request{Runtime: runtimeName, CPUMilli: reqCPUMilli, MemoryMB: reqMemoryMB, DiskMB: reqDiskMB,
	FreshWithin: 30 * time.Second}

// Result is what one run measured.
type Result struct {
	Config
	Creates    int
	Exhausted  int // creates that found no room (none expected)
	Elapsed    time.Duration
	Place      Dist // Reserve + Bind, as a control instance's create runs them
	Heartbeats int
	Beat       Dist
	// AuditShips and UsageShips are the nodes' shipments (store.ShipAudit,
	// store.ShipUsage) and AuditRows, UsageRows the rows they carried.
	AuditShips, UsageShips Dist
	AuditRows, UsageRows   int64
	// SQL is the server's execution time by statement, over the run.
	SQL []Statement
	// CPU seconds over the run: PostgreSQL's processes, and this one's.
	PostgresCPU, BenchCPU float64
}

// PerSecond is the creates placed per second.
func (r Result) PerSecond() float64 { return float64(r.Creates) / r.Elapsed.Seconds() }

// simNode is a simulated node: what it runs, for its heartbeats and its
// usage, and the audit entries its trail holds that it has not shipped.
type simNode struct {
	id, hash string
	mu       sync.Mutex
	live     []simSandbox
	seq      int64  // the trail's last entry
	prev     string // its hash
	unsent   []store.AuditEntry
	fresh    []simSandbox // created since the last shipment of their usage
}

// add records sandbox sb, created on the node, and its audit entries.
func (n *simNode) add(sb simSandbox) {
	n.mu.Lock()
	n.live = append(n.live, sb)
	n.fresh = append(n.fresh, sb)
	if n.prev == "" {
		n.prev = strings.Repeat("0", 64)
	}
	es := createEntries(n.id, n.seq+1, n.prev, sb)
	n.seq, n.prev = es[len(es)-1].Seq, es[len(es)-1].Hash
	n.unsent = append(n.unsent, es...)
	n.mu.Unlock()
}

// record is the node as it registers and heartbeats.
func (n *simNode) record() store.Node {
	return store.Node{ID: n.id, Address: "https://" + n.id + ".invalid", CPUMilli: nodeCPUMilli,
		MemoryMB: nodeMemoryMB, DiskMB: nodeDiskMB, MaxSandboxes: nodeSlots, Runtimes: []string{runtimeName},
		Labels: map[string]string{"zone": fmt.Sprintf("z%d", len(n.id)%3)}, CredentialNonce: "bench", CredentialHash: n.hash}
}

// lives are the sandboxes the node runs and their states, as its
// heartbeat sends them.
func (n *simNode) lives() []store.Live {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]store.Live, len(n.live))
	for i, sb := range n.live {
		out[i] = sb.live()
	}
	return out
}

// usage is the running figures at now of every live sandbox (all), or
// of those created since the last such call (fresh, which a failed
// shipment puts back with refresh).
func (n *simNode) usage(now time.Time, all bool) (rs []usage.Record, fresh []simSandbox) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sbs := n.fresh
	if all {
		sbs = n.live
	}
	fresh, n.fresh = n.fresh, nil
	rs = make([]usage.Record, len(sbs))
	for i, sb := range sbs {
		rs[i] = sb.usageAt(now)
	}
	return rs, fresh
}

// refresh puts back the new sandboxes whose first shipment failed.
func (n *simNode) refresh(sbs []simSandbox) {
	n.mu.Lock()
	n.fresh = append(sbs, n.fresh...)
	n.mu.Unlock()
}

// takeAudit takes the entries not shipped yet, at most store.MaxAuditPage.
func (n *simNode) takeAudit() []store.AuditEntry {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := min(len(n.unsent), store.MaxAuditPage)
	es := n.unsent[:k:k]
	n.unsent = n.unsent[k:]
	return es
}

// unshift puts back entries takeAudit took whose shipment failed (it
// may have committed: shipping them again changes nothing).
func (n *simNode) unshift(es []store.AuditEntry) {
	n.mu.Lock()
	n.unsent = append(es, n.unsent...)
	n.mu.Unlock()
}

// Cluster is a loaded database and its simulated nodes, for several runs.
type Cluster struct {
	url   string
	nodes map[string]*simNode
	ids   []string
	pools []*store.Store
	db    *admin
	seq   atomic.Int64 // the sandboxes placed, over every run: their ids
}

// Load empties the database at url and fills it: nodes registered
// through store.Register, records pre-loaded with COPY.
func Load(ctx context.Context, url string, nodes, records, livePerNode, nodePools int) (*Cluster, error) {
	if nodePools < 1 {
		nodePools = 1
	}
	c := &Cluster{url: url, nodes: map[string]*simNode{}}
	var err error
	if c.db, err = openAdmin(ctx, url); err != nil {
		return nil, err
	}
	for range nodePools {
		s, err := store.Open(ctx, url)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.pools = append(c.pools, s)
	}
	if err := c.db.reset(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.register(ctx, nodes); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.preload(ctx, records, livePerNode); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close closes every pool.
func (c *Cluster) Close() {
	for _, s := range c.pools {
		s.Close()
	}
	if c.db != nil {
		c.db.close()
	}
}

// register registers the nodes, 16 at a time.
func (c *Cluster) register(ctx context.Context, n int) error {
	for i := range n {
		id := fmt.Sprintf("node-%05d", i)
		c.nodes[id] = &simNode{id: id, hash: fmt.Sprintf("%064x", i)}
		c.ids = append(c.ids, id)
	}
	work := make(chan *simNode)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := c.pools[w%len(c.pools)]
			for n := range work {
				if err := s.Register(ctx, n.record()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, id := range c.ids {
		select {
		case work <- c.nodes[id]:
		case err := <-errs:
			close(work)
			wg.Wait()
			return err
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
