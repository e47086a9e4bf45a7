package scalebench

import (
	"context"
	mrand "math/rand/v2"
	"time"

	"corral/internal/cluster/store"
)

// ship runs node n's shipper until ctx ends, as internal/cluster/node's:
// every shipEvery (from a random phase) the audit entries that are new,
// every liveEvery (its own random phase) every live sandbox's running
// figures, a store.MaxUsageShip at a time, and with liveNew in the rounds
// between the figures of the sandboxes created since. The bench ends no sandbox, so
// there are no settled records to ship. The first error goes to errs.
func (h *heartbeats) ship(ctx context.Context, s *store.Store, n *simNode, shipEvery, liveEvery time.Duration, liveNew bool) {
	if sleep(ctx, mrand.N(shipEvery)) != nil {
		return
	}
	var liveAt time.Time
	if liveEvery > 0 {
		// As if the last live shipment were a random time ago.
		liveAt = time.Now().Add(-mrand.N(liveEvery))
	}
	t := time.NewTicker(shipEvery)
	defer t.Stop()
	for {
		err := h.shipAudit(ctx, s, n)
		if err == nil && liveEvery > 0 {
			switch all := time.Since(liveAt) >= liveEvery; {
			case all:
				liveAt = time.Now()
				err = h.shipLive(ctx, s, n, true)
			case liveNew:
				err = h.shipLive(ctx, s, n, false)
			}
		}
		if err != nil {
			h.fail(ctx, err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *heartbeats) shipAudit(ctx context.Context, s *store.Store, n *simNode) error {
	for {
		es := n.takeAudit()
		if len(es) == 0 {
			return nil
		}
		t0 := time.Now()
		if err := s.ShipAudit(ctx, n.id, es); err != nil {
			n.unshift(es)
			return err
		}
		if h.measuring.Load() {
			h.audit.add(time.Since(t0))
			h.auditRows.Add(int64(len(es)))
		}
	}
}

func (h *heartbeats) shipLive(ctx context.Context, s *store.Store, n *simNode, all bool) error {
	live, fresh := n.usage(time.Now().UTC(), all)
	for len(live) > 0 {
		k := min(len(live), store.MaxUsageShip)
		t0 := time.Now()
		if err := s.ShipUsage(ctx, n.id, live[:k]); err != nil {
			n.refresh(fresh) // shipped again at the next round or the flush
			return err
		}
		if h.measuring.Load() {
			h.usage.add(time.Since(t0))
			h.usageRows.Add(int64(k))
		}
		live = live[k:]
	}
	return nil
}

// fail hands err, the first of the nodes', to the run (unless the run
// is over).
func (h *heartbeats) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	select {
	case h.errs <- err:
	default:
	}
}
