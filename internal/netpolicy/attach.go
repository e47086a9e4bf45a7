package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/google/nftables"

	"corral/internal/cleanup"
	"corral/internal/errdefs"
	"corral/internal/netpolicy/policy"
)

// Attach gives sandbox id its network: a lease from the pool, the state
// file, the nftables objects for policy p, a namespace at
// <StateDir>/netns/<id>, and the veth pair with addresses and routes. On
// error everything it created is removed. The rules exist before the link
// does, so no packet of the sandbox ever passes unfiltered.
func (n *Network) Attach(ctx context.Context, id string, p policy.Policy) (*Slot, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := p.Normalize(); err != nil {
		return nil, fmt.Errorf("attaching sandbox %s: %w", id, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.checkOpen(); err != nil {
		return nil, err
	}
	if _, err := readState(n.cfg, id); n.slots[id] != nil || err == nil {
		return nil, fmt.Errorf("attaching sandbox %s: %w", id, errdefs.ErrAlreadyExists)
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("attaching sandbox %s: %w", id, err)
	}
	s, err := n.lease(id, p)
	if err != nil {
		return nil, fmt.Errorf("attaching sandbox %s: %w", id, err)
	}
	log := n.log.With("sandbox", id, "op", "attach")
	undo := cleanup.Make(ctx)
	defer undo.Clean()
	// Each undo is idempotent and registered before its step runs, so a
	// step that fails halfway (a link created, its address not) is undone
	// too.
	step := func(what string, do func() error, rollback func() error) error {
		undo.Add(func(context.Context) {
			if err := rollback(); err != nil {
				log.Warn("rollback failed", "step", what, "err", err)
			}
		})
		if err := do(); err != nil {
			return fmt.Errorf("attaching sandbox %s: %s: %w", id, what, err)
		}
		return nil
	}
	steps := []struct {
		what     string
		do, undo func() error
	}{
		{"recording state", func() error { return writeState(n.cfg, s) }, func() error { return removeState(n.cfg, id) }},
		{"installing rules", func() error { return n.installSandbox(s) }, func() error { return n.removeSandbox(s) }},
		{"creating namespace", func() error { return createNetns(s.NetnsPath) }, func() error { return removeNetns(s.NetnsPath) }},
		{"creating links", func() error { return setupLinks(s) }, func() error { return deleteLink(s.HostLink) }},
	}
	for _, st := range steps {
		if err := step(st.what, st.do, st.undo); err != nil {
			return nil, err
		}
	}
	n.register(s)
	undo.Release()
	log.Info("sandbox attached", "addr", s.Addr.String(), "link", s.HostLink)
	slot := s.Slot
	return &slot, nil
}

// lease picks the lowest free slot index whose link name is unused.
func (n *Network) lease(id string, p policy.Policy) (*slotState, error) {
	used := map[uint32]bool{}
	for _, s := range n.slots {
		used[s.Index] = true
	}
	for i := uint32(0); i < slotCount(n.cfg.Pool); i++ {
		if used[i] || linkExists(n.cfg.hostLinkName(i)) {
			continue
		}
		prefix, gw, addr := n.cfg.slotAddrs(i)
		return &slotState{
			Version: stateVersion,
			Slot: Slot{ID: id, NetnsPath: filepath.Join(n.cfg.netnsDir(), id), HostLink: n.cfg.hostLinkName(i),
				SandboxLink: SandboxLink, Gateway: gw, Addr: addr, Prefix: prefix},
			Index:  i,
			Policy: p,
		}, nil
	}
	return nil, fmt.Errorf("pool %v is full: %w", n.cfg.Pool, errdefs.ErrResourceExhausted)
}

// Detach removes everything Attach created for id: its flows, link, rules,
// namespace mount and state file. It works from the state file alone (after
// a daemon restart or crash) and is idempotent: an unknown id is a no-op.
func (n *Network) Detach(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	s, ok := n.slots[id]
	if !ok {
		var err error
		if s, err = readState(n.cfg, id); errors.Is(err, errdefs.ErrNotFound) {
			// Nothing recorded; at most a namespace mount a crash left
			// behind (New sweeps those too).
			return removeNetns(filepath.Join(n.cfg.netnsDir(), id))
		} else if err != nil {
			return fmt.Errorf("detaching sandbox %s: %w", id, err)
		}
	}
	if _, err := deleteFlows(s.Addr, nil); err != nil {
		n.log.Warn("removing conntrack entries", "sandbox", id, "op", "detach", "err", err)
	}
	var errs []error
	for _, f := range []func() error{
		func() error { return deleteLink(s.HostLink) },
		func() error { return n.removeSandbox(s) },
		func() error { return removeNetns(s.NetnsPath) },
	} {
		if err := f(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, removeState(n.cfg, id))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detaching sandbox %s: %w", id, err)
	}
	n.unregister(s)
	n.log.Info("sandbox detached", "sandbox", id, "op", "detach")
	return nil
}

// installSandbox adds the slot's nftables objects in one transaction.
func (n *Network) installSandbox(s *slotState) error {
	c, err := newConn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	if err := n.addSandbox(c, n.refs(), s, preserved{}); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("installing rules for %s: %w", s.ID, err)
	}
	return nil
}

// removeSandbox deletes the slot's nftables objects in one transaction.
// An install is one transaction, so a slot has all of them or none; the
// first try deletes all by name, which costs the same however many
// sandboxes the table holds. Only when that fails (a slot half-removed
// by hand, or installed by a daemon configured otherwise) does it list
// the table for whichever exist, which takes time in proportion to the
// sandboxes there (≈ 50 ms at 500).
func (n *Network) removeSandbox(s *slotState) error {
	c, err := newConn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	if ok, err := n.tableExists(c); err != nil || !ok {
		return err
	}
	if err := n.queueRemoval(c, s, n.installed(s)); err != nil {
		return err
	}
	if c.Flush() == nil {
		return nil
	}
	// Something was missing, so the transaction did nothing: delete what
	// is there (a failure for another cause fails again, and says so).
	inv, err := n.inventory(c, s)
	if err != nil {
		return err
	}
	if err := n.queueRemoval(c, s, inv); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("removing rules of %s: %w", s.ID, err)
	}
	return nil
}

// queueRemoval queues the deletion of the objects in inv: map elements
// first (they reference the chains), then chains with their rules (they
// reference sets and objects), then sets, counters and the log limit.
func (n *Network) queueRemoval(c *nftables.Conn, s *slotState, inv sbInventory) error {
	r, t := n.refs(), n.table()
	key := ifname(s.HostLink)
	for _, m := range []*nftables.Set{r.natLinks, r.inLinks, r.fwdLinks} {
		if inv.elements[m.Name] {
			if err := c.SetDeleteElements(m, []nftables.SetElement{{Key: key}}); err != nil {
				return fmt.Errorf("removing %s from %s: %w", s.HostLink, m.Name, err)
			}
		}
	}
	for _, name := range inv.chains {
		ch := &nftables.Chain{Name: name, Table: t}
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	for _, name := range inv.sets {
		c.DelSet(&nftables.Set{Table: t, Name: name})
	}
	for _, obj := range inv.objects {
		c.DeleteObject(obj)
	}
	return nil
}
