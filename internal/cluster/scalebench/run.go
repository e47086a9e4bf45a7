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

	hb := c.startBeats(ctx, cfg.Heartbeat)
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
	select {
	case err := <-hb.errs:
		return res, err
	default:
		return res, nil
	}
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
// node's create, Bind), the node's create being the fake runtime's:
// the sandbox is recorded on its simulated node.
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
		id := fmt.Sprintf("sb-run-%08d", c.seq.Add(1))
		if err := s.Bind(ctx, p.ID, id, ""); err != nil {
			return err
		}
		out.add(time.Since(t0))
		c.nodes[p.Node.ID].add(id)
	}
	return nil
}

// heartbeats are the simulated nodes beating during a run.
type heartbeats struct {
	measuring atomic.Bool
	got       samples // durations while measuring
	errs      chan error
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// startBeats starts every node's heartbeats, every interval (none when
// interval is 0).
func (c *Cluster) startBeats(ctx context.Context, interval time.Duration) *heartbeats {
	h := &heartbeats{errs: make(chan error, 1)}
	ctx, h.cancel = context.WithCancel(ctx)
	if interval <= 0 {
		return h
	}
	for i, id := range c.ids {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.beat(ctx, c.pools[i%len(c.pools)], c.nodes[id], interval)
		}()
	}
	return h
}

func (h *heartbeats) stop() {
	h.cancel()
	h.wg.Wait()
}

// beat heartbeats for node n every interval (from a random phase) until
// ctx ends, as internal/cluster/node does. The first error goes to errs.
func (h *heartbeats) beat(ctx context.Context, s *store.Store, n *simNode, interval time.Duration) {
	if sleep(ctx, mrand.N(interval)) != nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		t0 := time.Now()
		if _, err := s.Heartbeat(ctx, n.record(), n.snapshot(), placedGrace); err != nil {
			if ctx.Err() == nil {
				select {
				case h.errs <- err:
				default:
				}
			}
			return
		}
		if h.measuring.Load() {
			h.got.add(time.Since(t0))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

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
