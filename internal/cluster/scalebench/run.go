package scalebench

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
)

// Run measures cfg on the loaded cluster c: the nodes heartbeat, then
// cfg.Controls instances place creates for cfg.Duration.
func (c *Cluster) Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Config: cfg}
	ctrls := make([]*store.Store, 0, cfg.Controls)
	defer func() {
		for _, s := range ctrls {
			s.Close()
		}
	}()
	for range cfg.Controls {
		s, err := store.Open(ctx, c.url)
		if err != nil {
			return res, err
		}
		ctrls = append(ctrls, s)
	}

	hb := c.startBeats(ctx, cfg)
	defer hb.stop()
	if cfg.Heartbeat > 0 {
		// One interval, so every node's phase has come round once.
		if err := sleep(ctx, min(cfg.Heartbeat, 5*time.Second)); err != nil {
			return res, err
		}
	}

	stats := c.db.statsReset(ctx)
	pgCPU0, err := c.db.postgresCPU(ctx)
	if err != nil {
		return res, fmt.Errorf("reading PostgreSQL's CPU time: %w", err)
	}
	cpu0 := selfCPU()
	hb.measuring.Store(true)
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	res.Place, res.Exhausted, err = c.placeAll(ctx, ctrls, cfg.Placers, deadline)
	if err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	hb.measuring.Store(false)
	res.BenchCPU = selfCPU() - cpu0
	pgCPU1, err := c.db.postgresCPU(ctx)
	if err != nil {
		return res, fmt.Errorf("reading PostgreSQL's CPU time: %w", err)
	}
	res.PostgresCPU = pgCPU1 - pgCPU0
	if stats {
		if res.SQL, err = c.db.statements(ctx); err != nil {
			return res, err
		}
	}
	res.Creates = res.Place.N
	res.Beat = hb.got.dist()
	res.Heartbeats = res.Beat.N
	res.AuditShips, res.UsageShips = hb.audit.dist(), hb.usage.dist()
	res.AuditRows, res.UsageRows = hb.auditRows.Load(), hb.usageRows.Load()
	hb.stop()
	select {
	case err := <-hb.errs:
		return res, err
	default:
	}
	if cfg.ShipEvery > 0 {
		// What the nodes have not shipped, shipped (outside the
		// measurement), as a node does at its close.
		return res, c.flush(ctx, hb, cfg.LiveNew)
	}
	return res, nil
}

// flush ships every node's audit entries not shipped yet and, with
// liveNew, its new sandboxes' first running figures.
func (c *Cluster) flush(ctx context.Context, h *heartbeats, liveNew bool) error {
	for i, id := range c.ids {
		s, n := c.pools[i%len(c.pools)], c.nodes[id]
		if err := h.shipAudit(ctx, s, n); err != nil {
			return err
		}
		if !liveNew {
			continue
		}
		if err := h.shipLive(ctx, s, n, false); err != nil {
			return err
		}
	}
	return nil
}

// placeAll runs placers creates at once through each control instance
// until deadline (with none, it waits for the deadline): their
// latencies, and how many found no room.
func (c *Cluster) placeAll(ctx context.Context, ctrls []*store.Store, placers int, deadline time.Time) (Dist, int, error) {
	var place samples
	var exhausted atomic.Int64
	errs := make(chan error, len(ctrls)*placers)
	var wg sync.WaitGroup
	for _, s := range ctrls {
		for range placers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.place(ctx, s, deadline, &place, &exhausted); err != nil {
					errs <- err
				}
			}()
		}
	}
	if len(ctrls) == 0 {
		if err := sleep(ctx, time.Until(deadline)); err != nil {
			return Dist{}, 0, err
		}
	}
	wg.Wait()
	select {
	case err := <-errs:
		return Dist{}, 0, err
	default:
		return place.dist(), int(exhausted.Load()), nil
	}
}

// place creates until deadline as a control instance does (Reserve, the
// node's create, BindRecord with the node's answer), the node's create
// being the fake runtime's: the sandbox is recorded on its simulated
// node, which then heartbeats it, ships its audit entries and its usage.
func (c *Cluster) place(ctx context.Context, s *store.Store, deadline time.Time, out *samples, exhausted *atomic.Int64) error {
	for time.Now().Before(deadline) {
		t0 := time.Now()
		p, err := s.Reserve(ctx, request)
		if errors.Is(err, errdefs.ErrResourceExhausted) {
			exhausted.Add(1)
			return nil
		}
		if err != nil {
			return err
		}
		k := c.seq.Add(1)
		sb := simSandbox{id: fmt.Sprintf("sb-run-%08d", k), started: time.Now().UTC(), tags: sandboxTags(k)}
		if err := s.BindRecord(ctx, p.ID, sb.id, "", sb.record()); err != nil {
			return err
		}
		out.add(time.Since(t0))
		c.nodes[p.Node.ID].add(sb)
	}
	return nil
}

// heartbeats are the simulated nodes beating and shipping during a run.
type heartbeats struct {
	measuring            atomic.Bool
	got                  samples // heartbeats' durations while measuring
	audit, usage         samples // shipments' durations while measuring
	auditRows, usageRows atomic.Int64
	errs                 chan error
	cancel               context.CancelFunc
	wg                   sync.WaitGroup
}

// startBeats starts every node's heartbeats, every cfg.Heartbeat (none
// when 0), and its shipper (none when cfg.ShipEvery is 0).
func (c *Cluster) startBeats(ctx context.Context, cfg Config) *heartbeats {
	h := &heartbeats{errs: make(chan error, 1)}
	ctx, h.cancel = context.WithCancel(ctx)
	for i, id := range c.ids {
		s, n := c.pools[i%len(c.pools)], c.nodes[id]
		if cfg.Heartbeat > 0 {
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				h.beat(ctx, s, n, cfg.Heartbeat)
			}()
		}
		if cfg.ShipEvery > 0 {
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				h.ship(ctx, s, n, cfg.ShipEvery, cfg.LiveEvery, cfg.LiveNew)
			}()
		}
	}
	return h
}

func (h *heartbeats) stop() {
	h.cancel()
	h.wg.Wait()
}

// beat heartbeats for node n every interval (from a random phase) until
// ctx ends, as internal/cluster/node does: the sandboxes it runs and
// their states, and now and then its images. The first error goes to errs.
func (h *heartbeats) beat(ctx context.Context, s *store.Store, n *simNode, interval time.Duration) {
	if sleep(ctx, mrand.N(interval)) != nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for beats := 0; ; beats++ {
		t0 := time.Now()
		if _, err := s.HeartbeatLive(ctx, n.record(), n.lives(), placedGrace); err != nil {
			h.fail(ctx, err)
			return
		}
		if h.measuring.Load() {
			h.got.add(time.Since(t0))
		}
		// A node reports its images after a beat when they changed, and
		// every reportEvery beats (node/images.go); the simulated ones
		// never change.
		if beats%reportEvery == 0 {
			if err := s.ReportImages(ctx, n.id, n.hash, nodeImages, nil); err != nil {
				h.fail(ctx, err)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reportEvery is internal/cluster/node's: the beats between two reports
// of unchanged images.
const reportEvery = 12

// nodeImages are what each simulated node holds: five images.
var nodeImages = func() []store.NodeImage {
	var out []store.NodeImage
	for i := range 5 {
		out = append(out, store.NodeImage{Digest: "sha256:" + hash("image", fmt.Sprint(i)),
			Tags: []string{fmt.Sprintf("registry.example.com/agents/toolbox-%d:latest", i)}, Size: 700 << 20})
	}
	return out
}()

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// selfCPU is this process's CPU seconds so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
