package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"corral/internal/errdefs"
	"corral/internal/usage"
)

// SandboxUsage is what sandbox id used: settled once it ended (Live
// false), so far while it lives (a fresh reading of a running one).
type SandboxUsage struct {
	usage.Record
	Live bool
}

// UsageOf returns sandbox id's usage; ErrNotFound when there is none (an
// unknown sandbox, metering off, a sandbox that never ran, or one whose
// usage was pruned).
func (m *Manager) UsageOf(ctx context.Context, id string) (SandboxUsage, error) {
	if _, err := m.Get(ctx, id); err != nil {
		return SandboxUsage{}, err
	}
	if h := m.lookup(id); h != nil && m.meter != nil {
		m.observe(h)
		if r, ok := m.liveUsage(h.Record(), time.Now().UTC()); ok {
			r.EndedAt = time.Time{}
			return SandboxUsage{Record: r, Live: true}, nil
		}
	}
	r, err := m.records.GetUsage(ctx, id)
	if err != nil {
		return SandboxUsage{}, err
	}
	return SandboxUsage{Record: r}, nil
}

// UsageReport adds up the usage of the sandboxes that ran in [from, to)
// (a zero to: until now), ended and live, grouped by by (usage.ParseBy).
// A sandbox counts in full wherever its life overlaps the window.
func (m *Manager) UsageReport(ctx context.Context, from, to time.Time, by string) ([]usage.Group, error) {
	if err := usage.ParseBy(by); err != nil {
		return nil, fmt.Errorf("%w: %v", errdefs.ErrInvalidArgument, err)
	}
	if !to.IsZero() && !to.After(from) {
		return nil, errdefs.Invalid("to", "must be after from")
	}
	if m.meter == nil {
		return nil, fmt.Errorf("%w: usage metering is off on this daemon (serve --metering=false)", errdefs.ErrFailedPrecondition)
	}
	recs, err := m.records.ListUsage(ctx, from, to, maxUsageRecords)
	if err != nil {
		return nil, err
	}
	settled := make(map[string]bool, len(recs))
	for _, r := range recs {
		settled[r.SandboxID] = true
	}
	for _, id := range m.liveIDs() {
		if settled[id] {
			continue
		}
		su, err := m.UsageOf(ctx, id)
		if errors.Is(err, errdefs.ErrNotFound) || err == nil && !su.Live {
			continue
		} else if err != nil {
			return nil, err
		}
		if to.IsZero() || su.StartedAt.Before(to) {
			recs = append(recs, su.Record)
		}
	}
	return usage.GroupBy(recs, by), nil
}

// liveIDs lists the live sandboxes' ids.
func (m *Manager) liveIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.handles))
	for id := range m.handles {
		out = append(out, id)
	}
	return out
}

// Metered reports whether usage metering is on.
func (m *Manager) Metered() bool { return m.meter != nil }

// retainUsage prunes the usage of sandboxes that ended longer than the
// usage retention ago, now and then, until the manager closes.
func (m *Manager) retainUsage() {
	defer m.wg.Done()
	keep := m.cfg.Metering.Retention
	t := time.NewTicker(Retention{Keep: keep}.interval())
	defer t.Stop()
	for {
		if n, err := m.records.PruneUsage(m.ctx, time.Now().Add(-keep)); err != nil {
			if m.ctx.Err() != nil {
				return
			}
			m.log.Warn("pruning usage records", "op", "retention", "err", err)
		} else if n > 0 {
			m.log.Info("pruned usage records", "op", "retention", "records", n, "retention", keep.String())
		}
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
	}
}
