package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"corral/internal/errdefs"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
	"corral/internal/usage"
)

// Metering configures usage metering (package usage): every Interval the
// running sandboxes' host counters are read into their accounts, once
// more at their end, when the account is settled into the records.
type Metering struct {
	// Off turns metering off: no readings, no usage records.
	Off bool
	// Interval is the time between readings; default DefaultMeterInterval.
	Interval time.Duration
	// Retention is how long an ended sandbox's usage is kept; zero keeps
	// it forever.
	Retention time.Duration
}

// Metering defaults.
const (
	DefaultMeterInterval  = 5 * time.Second
	DefaultUsageRetention = 90 * 24 * time.Hour
	// meterReadTimeout bounds one sandbox's reading.
	meterReadTimeout = 2 * time.Second
	// maxUsageRecords bounds the settled records one report adds up.
	maxUsageRecords = 100_000
)

// meter holds the accounts of the live sandboxes.
type meter struct {
	mu    sync.Mutex
	accts map[string]*usage.Account
}

// startMetering starts the meter's loops unless metering is off.
func (m *Manager) startMetering() {
	if m.cfg.Metering.Off {
		return
	}
	if m.cfg.Metering.Interval <= 0 {
		m.cfg.Metering.Interval = DefaultMeterInterval
	}
	m.meter = &meter{accts: map[string]*usage.Account{}}
	m.host.Settle = m.settleUsage
	m.wg.Add(1)
	go m.meterLoop()
	if m.cfg.Metering.Retention > 0 {
		m.wg.Add(1)
		go m.retainUsage()
	}
}

// meterLoop reads every running sandbox each interval until the manager
// closes.
func (m *Manager) meterLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.Metering.Interval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			m.meterRound()
		}
	}
}

// meterRound reads the running sandboxes, moves the paused ones' clocks
// on, and drops the accounts of sandboxes no longer live.
func (m *Manager) meterRound() {
	m.mu.Lock()
	hs := make([]*handle.Handle, 0, len(m.handles))
	for _, h := range m.handles {
		hs = append(hs, h)
	}
	m.mu.Unlock()
	live := make(map[string]bool, len(hs))
	for _, h := range hs {
		live[h.ID()] = true
		m.observe(h)
	}
	m.meter.mu.Lock()
	for id := range m.meter.accts {
		if !live[id] {
			delete(m.meter.accts, id)
		}
	}
	m.meter.mu.Unlock()
}

// observe reads sandbox h into its account if it runs (a paused one's
// clock moves on, uncharged). Warm pool sandboxes are nobody's yet.
func (m *Manager) observe(h *handle.Handle) {
	rec := h.Record()
	if pooled(rec) || rec.StartedAt.IsZero() {
		return
	}
	switch rec.State {
	case sandbox.Running:
		r, err := m.read(h)
		if err != nil {
			m.log.Debug("metering a sandbox failed", "sandbox", h.ID(), "err", err)
			return
		}
		m.account(rec, func(a *usage.Account) { a.Observe(r) })
	case sandbox.Paused:
		m.account(rec, func(a *usage.Account) { a.Skip(time.Now()) })
	}
}

// account runs f on rec's account, made on first use, under the lock.
func (m *Manager) account(rec *sandbox.Sandbox, f func(*usage.Account)) {
	m.meter.mu.Lock()
	defer m.meter.mu.Unlock()
	a := m.meter.accts[rec.ID]
	if a == nil {
		a = usage.NewAccount(usage.Request{CPU: rec.Spec.CPU, MemoryBytes: uint64(rec.Spec.MemoryMB) << 20,
			DiskQuotaBytes: uint64(rec.Spec.DiskMB) << 20}, meterStart(rec))
		m.meter.accts[rec.ID] = a
	}
	f(a)
}

// read measures a running sandbox: its runtime's cgroup and disk
// figures, and its link's byte counters.
func (m *Manager) read(h *handle.Handle) (usage.Reading, error) {
	rt, ok := h.Runtime().(runtime.Meter)
	if !ok {
		return usage.Reading{}, fmt.Errorf("%w: runtime %s cannot measure sandboxes", errdefs.ErrNotSupported, h.Runtime().Name())
	}
	ctx, cancel := context.WithTimeout(m.ctx, meterReadTimeout)
	defer cancel()
	u, err := rt.Usage(ctx, h.Ref())
	if err != nil {
		return usage.Reading{}, err
	}
	r := usage.Reading{Time: time.Now(), CPUNanos: u.CPUNanos, MemoryBytes: u.MemoryBytes, DiskBytes: u.DiskBytes}
	if m.networkEnabled() {
		if in, out, err := m.cfg.Network.Layer.Counters(h.ID()); err == nil {
			r.NetInBytes, r.NetOutBytes = in, out
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return r, err
		}
	}
	return r, nil
}

// meterPausing takes a last reading of a sandbox about to be paused (a
// runtime may drop its counters with its processes).
func (m *Manager) meterPausing(h *handle.Handle) {
	if m.meter == nil {
		return
	}
	rec := h.Record()
	if r, err := m.read(h); err == nil && !pooled(rec) && !rec.StartedAt.IsZero() {
		m.account(rec, func(a *usage.Account) { a.Observe(r) })
	}
}

// meterResumed starts a resumed sandbox's clock again. gVisor restores a
// sandbox into new processes and a new cgroup, whose counters start from
// zero; a vm's QEMU keeps its own, unless the resume booted the sandbox
// afresh (rebooted: a filesystem-only pause).
func (m *Manager) meterResumed(h *handle.Handle, rebooted bool) {
	if m.meter == nil {
		return
	}
	rec := h.Record()
	if pooled(rec) || rec.StartedAt.IsZero() {
		return
	}
	m.account(rec, func(a *usage.Account) {
		a.Skip(time.Now())
		if rebooted || h.Runtime().Name() == "gvisor" {
			a.CPURestarted()
		}
	})
}

// settleUsage is the teardown's first step: a last reading of the
// sandbox, then its account into the records. A sandbox that never ran
// (a failed create) has nothing to settle.
func (m *Manager) settleUsage(ctx context.Context, h *handle.Handle) {
	rec := h.Record()
	if rec.StartedAt.IsZero() || pooled(rec) {
		return
	}
	if rec.State == sandbox.Running || rec.State == sandbox.Terminating {
		if r, err := m.read(h); err == nil {
			m.account(rec, func(a *usage.Account) { a.Observe(r) })
		}
	}
	ur, ok := m.liveUsage(rec, time.Now().UTC())
	if !ok {
		return
	}
	if err := m.records.PutUsage(ctx, ur); err != nil {
		m.log.Warn("recording a sandbox's usage", "sandbox", rec.ID, "err", err)
		return
	}
	m.meter.mu.Lock()
	delete(m.meter.accts, rec.ID)
	m.meter.mu.Unlock()
}

// liveUsage is rec's usage so far, as at now; false without an account.
func (m *Manager) liveUsage(rec *sandbox.Sandbox, now time.Time) (usage.Record, bool) {
	m.meter.mu.Lock()
	a := m.meter.accts[rec.ID]
	var t usage.Totals
	if a != nil {
		running, paused := wallByState(rec, now)
		t = a.Totals(running, paused)
	}
	m.meter.mu.Unlock()
	if a == nil {
		return usage.Record{}, false
	}
	return usage.Record{SandboxID: rec.ID, Runtime: rec.Spec.Runtime, Tags: rec.Spec.Tags,
		StartedAt: meterStart(rec), EndedAt: now, Totals: t}, true
}

// wallByState splits the time from rec's metered start to now into
// running and paused.
func wallByState(rec *sandbox.Sandbox, now time.Time) (running, paused time.Duration) {
	paused = rec.PausedFor
	if !rec.PausedAt.IsZero() && now.After(rec.PausedAt) {
		paused += now.Sub(rec.PausedAt)
	}
	return max(now.Sub(meterStart(rec))-paused, 0), paused
}

// meterStart is when rec's usage starts: its start, or for a warm pool's
// sandbox its claim (the record's creation, set again then).
func meterStart(rec *sandbox.Sandbox) time.Time {
	if rec.CreatedAt.After(rec.StartedAt) {
		return rec.CreatedAt
	}
	return rec.StartedAt
}

// meterClaimed starts the account of a warm pool sandbox just claimed
// from a reading now: what it used in the pool is not the caller's.
func (m *Manager) meterClaimed(h *handle.Handle) {
	if m.meter == nil {
		return
	}
	rec := h.Record()
	r, err := m.read(h)
	if err != nil {
		m.log.Debug("metering a claimed sandbox failed", "sandbox", h.ID(), "err", err)
		return
	}
	m.account(rec, func(a *usage.Account) { a.Baseline(r) })
}
