package manager

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"corral/internal/ids"
)

// Retention bounds how long an ended sandbox's traces stay: its record
// (corral inspect, ls --all), its events and its entrypoint log. Terminate
// removes everything else at once (processes, writable layer, network,
// cgroup, image lease); these stay so that a caller can still ask how a
// sandbox ended, until the retention has passed since it ended. A sandbox
// that has not ended is never pruned.
type Retention struct {
	// Keep is how long after its end a sandbox's traces are kept; zero
	// keeps them forever.
	Keep time.Duration
	// Every is how often the pruner runs; zero: Keep/10, between a second
	// and ten minutes.
	Every time.Duration
}

// DefaultRetention is what the daemon keeps when its operator says
// nothing: a week.
const DefaultRetention = 7 * 24 * time.Hour

// pruneBatch bounds the records deleted in one transaction.
const pruneBatch = 256

func (r Retention) interval() time.Duration {
	if r.Every > 0 {
		return r.Every
	}
	return min(max(r.Keep/10, time.Second), 10*time.Minute)
}

// retain prunes ended sandboxes' traces now and then every interval,
// until the manager closes.
func (m *Manager) retain() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.Retention.interval())
	defer t.Stop()
	for {
		if n, err := m.pruneEnded(m.ctx, time.Now().Add(-m.cfg.Retention.Keep)); err != nil {
			if m.ctx.Err() != nil {
				return
			}
			m.log.Warn("pruning ended sandboxes", "op", "retention", "err", err)
		} else if n > 0 {
			m.log.Info("pruned ended sandboxes", "op", "retention", "sandboxes", n, "retention", m.cfg.Retention.Keep.String())
		}
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pruneEnded removes the records, events and entrypoint logs of the
// sandboxes that ended before before, then events and logs left without a
// record that are as old, and returns how many sandboxes' records went.
func (m *Manager) pruneEnded(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for {
		pruned, err := m.records.PruneEnded(ctx, before, pruneBatch)
		if err != nil {
			return total, err
		}
		for _, id := range pruned {
			if err := os.Remove(m.cfg.logPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
				m.log.Warn("removing an ended sandbox's log", "op", "retention", "sandbox", id, "err", err)
			}
		}
		total += len(pruned)
		if len(pruned) < pruneBatch {
			break
		}
	}
	if _, err := m.records.PruneOrphanEvents(ctx, before); err != nil {
		return total, err
	}
	return total, m.pruneOrphanLogs(ctx, before)
}

// pruneOrphanLogs removes the entrypoint logs last written before before
// whose sandbox has no record (one a daemon stopped between removing a
// record and its log left behind).
func (m *Manager) pruneOrphanLogs(ctx context.Context, before time.Time) error {
	ents, err := os.ReadDir(m.cfg.logsDir())
	if err != nil {
		return err
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || !ids.Sandbox(id) || m.lookup(id) != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(before) {
			continue
		}
		if has, err := m.records.HasSandbox(ctx, id); err != nil || has {
			if err != nil {
				return err
			}
			continue
		}
		if err := os.Remove(m.cfg.logPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.log.Warn("removing an orphan log", "op", "retention", "sandbox", id, "err", err)
		}
	}
	return nil
}
