package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"corral/internal/audit"
	"corral/internal/cluster/store"
	"corral/internal/manager"
	"corral/internal/usage"
)

// A node ships its audit trail and its sandboxes' usage to the cluster
// database, so that a control plane answers /v1/audit and /v1/usage from
// there, for lost nodes too. The node's SQLite stays the source: the
// shipper tails it from what the database already holds (read again at
// each start, so a restart or a kill -9 ships what was left, and a
// repeat changes nothing), a bounded batch at a time, every shipEvery and
// once more at Close. While the database is out of reach the node goes
// on as before and catches up when it is back.

const (
	// shipEvery is the time between shipments: the lag of the cluster's
	// audit trail and settled usage behind the node's.
	shipEvery = time.Second
	// liveEvery is the time between shipments of the live sandboxes'
	// running usage figures: the lag of a live sandbox's figures in the
	// cluster's usage. Every live sandbox's figures change between two
	// shipments (its running or paused seconds do), so each shipment
	// upserts a row per live sandbox: at 5 s, 10,000 nodes of 50
	// sandboxes were 100,000 rows a second, the cluster database's
	// largest load (docs/SCALING.md); a minute makes it 8,300. The
	// settled record at a sandbox's end is exact, shipped within
	// shipEvery, whatever this is.
	liveEvery = time.Minute
	// shipRounds bounds the batches one shipment sends (a node catching
	// up sends shipRounds batches a second).
	shipRounds = 10
	// settleOverlap is how far before the newest settled record shipped
	// each shipment reads again: a record settled concurrently with a
	// later one commits a moment after it.
	settleOverlap = 5 * time.Second
)

// shipper is the state of the shipping goroutine (its own).
type shipper struct {
	st    *store.Store
	node  string
	trail *audit.Trail // nil: the trail is off
	m     *manager.Manager
	log   *slog.Logger
	// auditAt is the newest seq the database holds; -1 until read.
	auditAt int64
	// halted: the node's trail does not continue the database's.
	halted bool
	// settled is the latest end among the settled records shipped;
	// settledRead says it was read from the database.
	settled     time.Time
	settledRead bool
	// liveAt is the last shipment of every live sandbox's figures;
	// liveShipped the sandboxes it and the rounds since shipped (a new
	// one's first figures go at the next round, not liveEvery later).
	liveAt      time.Time
	liveShipped map[string]bool
	// failing: the last shipment failed (logged once until one works).
	failing bool
}

// ship runs the shipper until ctx ends, then ships once more.
func (n *Node) ship(ctx context.Context, sh *shipper) {
	defer n.wg.Done()
	t := time.NewTicker(shipEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			sh.round(fctx)
			cancel()
			return
		case <-t.C:
			sh.round(ctx)
		}
	}
}

// round ships what is new.
func (sh *shipper) round(ctx context.Context) {
	err := sh.shipAudit(ctx)
	if uerr := sh.shipUsage(ctx); err == nil {
		err = uerr
	}
	switch {
	case err != nil && !sh.failing && ctx.Err() == nil:
		sh.failing = true
		sh.log.Warn("shipping the audit trail and usage to the cluster database failed; retrying every second", "op", "cluster", "node", sh.node, "err", err)
	case err == nil && sh.failing:
		sh.failing = false
		sh.log.Info("shipping the audit trail and usage to the cluster database again", "op", "cluster", "node", sh.node)
	}
}

// shipAudit ships the trail's entries after the database's newest.
func (sh *shipper) shipAudit(ctx context.Context) error {
	if sh.trail == nil || sh.halted {
		return nil
	}
	if sh.auditAt < 0 {
		if err := sh.resumeAudit(ctx); err != nil || sh.halted {
			return err
		}
	}
	for range shipRounds {
		es, err := sh.trail.Query(ctx, audit.Filter{After: sh.auditAt, Limit: store.MaxAuditPage})
		if err != nil || len(es) == 0 {
			return err
		}
		out := make([]store.AuditEntry, len(es))
		for i, e := range es {
			out[i] = store.AuditEntry{Node: sh.node, Seq: e.Seq, Time: e.Time, Kind: e.Kind, SandboxID: e.SandboxID,
				Caller: e.Caller, Fields: e.Fields, PrevHash: e.PrevHash, Hash: e.Hash}
		}
		if err := sh.st.ShipAudit(ctx, sh.node, out); err != nil {
			return err
		}
		sh.auditAt = es[len(es)-1].Seq
		if len(es) < store.MaxAuditPage {
			return nil
		}
	}
	return nil
}

// resumeAudit reads where the database's copy of the trail ends, and
// halts shipping if the node's own entry there is another (a state
// directory whose trail is not the one this node name shipped).
func (sh *shipper) resumeAudit(ctx context.Context) error {
	seq, hash, err := sh.st.AuditHead(ctx, sh.node)
	if err != nil {
		return err
	}
	if seq > 0 {
		es, err := sh.trail.Query(ctx, audit.Filter{After: seq - 1, Limit: 1})
		if err != nil {
			return err
		}
		if len(es) == 1 && es[0].Seq == seq && es[0].Hash != hash {
			sh.halted = true
			sh.log.Error("this node's audit trail is not the one the cluster database holds for its name (their entry "+
				fmt.Sprint(seq)+" differs): not shipping it", "op", "cluster", "node", sh.node)
			return nil
		}
	}
	sh.auditAt = seq
	return nil
}

// shipUsage ships the records settled since the newest shipped (and
// settleOverlap before it), and the live sandboxes' running figures
// (shipLive).
func (sh *shipper) shipUsage(ctx context.Context) error {
	if !sh.settledRead {
		t, err := sh.st.UsageSettledThrough(ctx, sh.node)
		if err != nil {
			return err
		}
		sh.settled, sh.settledRead = t, true
	}
	var from time.Time
	if !sh.settled.IsZero() {
		from = sh.settled.Add(-settleOverlap)
	}
	for range shipRounds {
		rs, err := sh.m.SettledUsage(ctx, from, store.MaxUsageShip)
		if err != nil || len(rs) == 0 {
			if err != nil {
				return err
			}
			break
		}
		if err := sh.st.ShipUsage(ctx, sh.node, rs); err != nil {
			return err
		}
		last := rs[len(rs)-1].EndedAt
		if last.After(sh.settled) {
			sh.settled = last
		}
		if len(rs) < store.MaxUsageShip {
			break
		}
		// A full batch: go on after it (past it, should a whole batch
		// have ended at one instant).
		if last.After(from) {
			from = last
		} else {
			from = from.Add(time.Nanosecond)
		}
	}
	return sh.shipLive(ctx)
}

// shipLive ships every live sandbox's running figures every liveEvery,
// and in the rounds between the figures of those not shipped yet.
func (sh *shipper) shipLive(ctx context.Context) error {
	live, all := sh.liveDue(sh.m.LiveUsage(), time.Now())
	for len(live) > 0 {
		n := min(len(live), store.MaxUsageShip)
		if err := sh.st.ShipUsage(ctx, sh.node, live[:n]); err != nil {
			return err
		}
		for _, r := range live[:n] {
			sh.liveShipped[r.SandboxID] = true
		}
		live = live[n:]
	}
	if all {
		sh.liveAt = time.Now()
	}
	return nil
}

// liveDue is what of live (the live sandboxes' figures at now) to ship:
// all of it (all true, the shipped set started again) when liveEvery has
// passed since the last such shipment, else the sandboxes not shipped.
func (sh *shipper) liveDue(live []usage.Record, now time.Time) (due []usage.Record, all bool) {
	if now.Sub(sh.liveAt) >= liveEvery || sh.liveShipped == nil {
		sh.liveShipped = make(map[string]bool, len(live))
		return live, true
	}
	return slices.DeleteFunc(live, func(r usage.Record) bool { return sh.liveShipped[r.SandboxID] }), false
}
