package manager

import (
	"context"
	"time"

	"corral/internal/usage"
)

// LiveUsage is the usage so far of every metered live sandbox, as its
// last reading left it (no new reading is taken), EndedAt zero; nil when
// metering is off. A cluster node ships it now and then.
func (m *Manager) LiveUsage() []usage.Record {
	if m.meter == nil {
		return nil
	}
	m.mu.Lock()
	hs := make([]string, 0, len(m.handles))
	for id := range m.handles {
		hs = append(hs, id)
	}
	m.mu.Unlock()
	now := time.Now().UTC()
	var out []usage.Record
	for _, id := range hs {
		h := m.lookup(id)
		if h == nil {
			continue
		}
		if r, ok := m.liveUsage(h.Record(), now); ok {
			r.EndedAt = time.Time{}
			out = append(out, r)
		}
	}
	return out
}

// SettledUsage lists the usage records of the sandboxes that ended at or
// after from, earliest end first, at most limit.
func (m *Manager) SettledUsage(ctx context.Context, from time.Time, limit int) ([]usage.Record, error) {
	return m.records.ListUsage(ctx, from, time.Time{}, limit)
}
