package manager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/manager/handle"
	"corral/internal/sandbox"
)

// templatePrefix names the memory snapshots warm pools refill from.
const templatePrefix = reservedPrefix + "pool-"

// templated reports whether a pool of spec refills from a template (a
// memory snapshot of its first sandbox) instead of cold starts: on vm,
// where a restore takes about a tenth of a boot; a gVisor restore costs
// about what a cold start does (docs/BENCHMARKS.md).
func templated(spec sandbox.Spec) bool { return spec.Runtime == "vm" }

// templateName is the snapshot name of the template of a pool of spec:
// the same for every daemon run, so a restarted daemon reuses it.
func templateName(spec sandbox.Spec) string {
	key := fmt.Sprintf("%s|%s|%g|%g|%d|%d|%d", spec.Runtime, spec.Image, spec.CPU, spec.CPULimit,
		spec.MemoryMB, spec.MemoryLimitMB, spec.DiskMB)
	sum := sha256.Sum256([]byte(key))
	return templatePrefix + spec.Runtime + "-" + hex.EncodeToString(sum[:6])
}

// adoptTemplates, at start, takes up each templated pool's template left
// by an earlier run when this daemon can restore it, and removes the ones
// it cannot or that no pool of this run uses.
func (m *Manager) adoptTemplates(ctx context.Context) {
	want := map[string]*warmPool{}
	for _, p := range m.pools {
		if templated(p.spec) {
			want[templateName(p.spec)] = p
		}
	}
	snaps, err := m.records.ListSnapshots(ctx)
	if err != nil {
		m.log.Warn("listing warm pool templates", "err", err)
		return
	}
	for _, sn := range snaps {
		if !strings.HasPrefix(sn.Name, templatePrefix) {
			continue
		}
		p := want[sn.Name]
		if p != nil {
			if err := m.checkRestorable(ctx, sn); err == nil {
				p.template = sn
				continue
			}
		}
		m.log.Info("removing a warm pool template", "snapshot", sn.ID, "name", sn.Name)
		if _, err := m.snaps.Remove(ctx, sn.ID); err != nil {
			m.log.Warn("removing a warm pool template", "snapshot", sn.ID, "err", err)
		}
	}
}

// fillFromTemplate starts a sandbox of p from its template, making the
// template first (from a cold start, which then joins the pool) when there
// is none. A template this daemon can no longer restore is dropped and
// made anew.
func (m *Manager) fillFromTemplate(p *warmPool, spec sandbox.Spec) (*handle.Handle, error) {
	p.mu.Lock()
	tmpl := p.template
	p.mu.Unlock()
	rt, err := m.resolve(&spec)
	if err != nil {
		return nil, err
	}
	if tmpl != nil {
		copySpec := spec
		copySpec.FromSnapshot = tmpl.ID
		h, err := m.launch(m.ctx, copySpec, rt, launchOpts{from: tmpl, pooled: true})
		if err == nil {
			return h, nil
		}
		// A failed start (the daemon stopping, the host out of room) says
		// nothing against the template; one this daemon can no longer
		// restore (another runtime version, its files gone) is made anew.
		if m.ctx.Err() != nil || m.checkRestorable(m.ctx, tmpl) == nil {
			return nil, err
		}
		m.log.Warn("warm pool: the template cannot be restored; making a new one", "snapshot", tmpl.ID, "err", err)
		m.dropTemplate(p, tmpl)
	}
	h, err := m.launch(m.ctx, spec, rt, launchOpts{pooled: true})
	if err != nil {
		return nil, err
	}
	if err := m.makeTemplate(p, h); err != nil {
		m.log.Warn("warm pool: making a template failed; refilling cold", "err", err)
	}
	return h, nil
}

// makeTemplate snapshots the pooled sandbox h as p's template.
func (m *Manager) makeTemplate(p *warmPool, h *handle.Handle) error {
	name := templateName(p.spec)
	if old, err := m.snaps.Get(m.ctx, name); err == nil {
		m.dropTemplate(p, old) // a leftover this run could not restore
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	tmpl, err := m.snaps.take(m.ctx, h.ID(), name)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.template = tmpl
	p.mu.Unlock()
	m.log.Info("warm pool template made", "snapshot", tmpl.ID, "name", name, "bytes", tmpl.SizeBytes)
	return nil
}

// dropTemplate forgets and removes a template.
func (m *Manager) dropTemplate(p *warmPool, tmpl *sandbox.Snapshot) {
	p.mu.Lock()
	if p.template != nil && p.template.ID == tmpl.ID {
		p.template = nil
	}
	p.mu.Unlock()
	if _, err := m.snaps.Remove(context.WithoutCancel(m.ctx), tmpl.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("removing a warm pool template", "snapshot", tmpl.ID, "err", err)
	}
}
