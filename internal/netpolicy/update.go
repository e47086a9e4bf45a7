package netpolicy

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
	"corral/internal/netpolicy/policy"
)

// Bounds on AllowResolved's ttl.
const (
	MinResolvedTTL     = time.Second
	MaxResolvedTTL     = 24 * time.Hour
	DefaultResolvedTTL = 5 * time.Minute
)

// SetPolicy replaces the policy of a running sandbox: the state file, then
// its three chains and its allowlist set in one nftables transaction, then
// the conntrack entries of flows the new policy no longer allows (so a
// switch to block_network cuts open connections too). A changed domain
// allowlist also empties the resolved-address set.
func (n *Network) SetPolicy(ctx context.Context, id string, p policy.Policy) error {
	if err := p.Normalize(); err != nil {
		return fmt.Errorf("setting policy of %s: %w", id, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.checkOpen(); err != nil {
		return err
	}
	s, ok := n.slots[id]
	if !ok {
		return fmt.Errorf("setting policy of %s: %w", id, errdefs.ErrNotFound)
	}
	next := *s
	next.Policy = p
	domainsChanged := !slices.Equal(s.Policy.DomainAllowlist, p.DomainAllowlist)
	if err := writeState(n.cfg, &next); err != nil {
		return fmt.Errorf("setting policy of %s: %w", id, err)
	}
	if err := n.replaceRules(&next, domainsChanged); err != nil {
		if rerr := writeState(n.cfg, s); rerr != nil {
			n.log.Error("restoring state after failed policy change", "sandbox", id, "op", "set_policy", "err", rerr)
		}
		return fmt.Errorf("setting policy of %s: %w", id, err)
	}
	s.Policy = p
	keep := func(dst netip.Addr, proto uint8, port uint16) bool {
		if p.BlockNetwork {
			return false
		}
		if port == 53 && (proto == unix.IPPROTO_TCP || proto == unix.IPPROTO_UDP) {
			return true // DNS goes to the resolver, which applies the policy
		}
		if ok, _ := p.AllowsAddr(dst, n.cfg.OperatorAllowed); !ok || n.HostNetwork(dst) {
			return false
		}
		return !domainMode(p) || (proto == unix.IPPROTO_TCP && !domainsChanged)
	}
	if cut, err := deleteFlows(s.Addr, keep); err != nil {
		n.log.Warn("cutting flows after policy change", "sandbox", id, "op", "set_policy", "err", err)
	} else if cut > 0 {
		n.log.Info("cut flows the new policy denies", "sandbox", id, "op", "set_policy", "flows", cut)
	}
	return nil
}

// replaceRules swaps the slot's rules in one transaction.
func (n *Network) replaceRules(s *slotState, flushResolved bool) error {
	c, err := newConn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	r := n.refs()
	o := sbNames(s.Index)
	for _, name := range []string{o.nat, o.in, o.fwd} {
		c.FlushChain(&nftables.Chain{Name: name, Table: r.t})
	}
	allow, resolved := sbSets(r.t, o)
	c.FlushSet(allow)
	if els := intervalElements(spansOf(s.Policy.CIDRAllowlist)); len(els) > 0 {
		if err := c.SetAddElements(allow, els); err != nil {
			return fmt.Errorf("filling %s: %w", o.allow, err)
		}
	}
	if flushResolved {
		c.FlushSet(resolved)
	}
	n.addSandboxRules(c, r, s, allow, resolved)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("replacing rules: %w", err)
	}
	return nil
}

// AllowResolved lets sandbox id reach addrs for ttl (clamped to
// [MinResolvedTTL, MaxResolvedTTL]; DefaultResolvedTTL when not positive):
// the resolver calls it with the addresses of each answer it lets through
// in domain mode. Addresses in denied ranges or the host's networks,
// other sandboxes' and IPv6 addresses are skipped (a name resolving to
// 10.0.0.1 still reaches nothing). Re-adding an address restarts its
// timeout.
func (n *Network) AllowResolved(id string, addrs []netip.Addr, ttl time.Duration) error {
	switch {
	case ttl <= 0:
		ttl = DefaultResolvedTTL
	case ttl < MinResolvedTTL:
		ttl = MinResolvedTTL
	case ttl > MaxResolvedTTL:
		ttl = MaxResolvedTTL
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.checkOpen(); err != nil {
		return err
	}
	s, ok := n.slots[id]
	if !ok {
		return fmt.Errorf("allowing resolved addresses for %s: %w", id, errdefs.ErrNotFound)
	}
	var els []nftables.SetElement
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		if !a.Is4() || seen[a] || spansContain(n.denied, a) || n.cfg.Pool.Contains(a) || n.HostNetwork(a) {
			continue
		}
		seen[a] = true
		els = append(els, nftables.SetElement{Key: a.AsSlice(), Timeout: ttl})
	}
	if len(els) == 0 || s.Policy.BlockNetwork {
		return nil
	}
	c, err := newConn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	_, set := sbSets(n.table(), sbNames(s.Index))
	// Add, delete, add: the element exists whether or not it did before,
	// and comes back with a fresh timeout, all in one transaction.
	for _, op := range []func(*nftables.Set, []nftables.SetElement) error{c.SetAddElements, c.SetDeleteElements, c.SetAddElements} {
		if err := op(set, els); err != nil {
			return fmt.Errorf("allowing resolved addresses for %s: %w", id, err)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("allowing resolved addresses for %s: %w", id, err)
	}
	return nil
}

// Denials returns how many packets of sandbox id the kernel rules dropped
// since New (counters survive policy changes and daemon restarts).
func (n *Network) Denials(id string) (uint64, error) {
	counts, err := n.DenialCounts(id)
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, v := range counts {
		total += v
	}
	return total, nil
}

// DenialCounts returns dropped packets of sandbox id by reason (the
// Denied* constants).
func (n *Network) DenialCounts(id string) (map[string]uint64, error) {
	n.mu.RLock()
	s, ok := n.slots[id]
	n.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("reading denials of %s: %w", id, errdefs.ErrNotFound)
	}
	c, err := newConn()
	if err != nil {
		return nil, fmt.Errorf("opening nftables: %w", err)
	}
	objs, err := c.GetNamedObjects(n.table())
	if err != nil {
		return nil, fmt.Errorf("reading denials of %s: %w", id, err)
	}
	o := sbNames(s.Index)
	out := map[string]uint64{}
	for _, obj := range objs {
		no, ok := obj.(*nftables.NamedObj)
		if !ok {
			continue
		}
		reason, ok := strings.CutPrefix(no.Name, o.prefix)
		if ctr, isCtr := no.Obj.(*expr.Counter); ok && isCtr {
			out[reason] = ctr.Packets
		}
	}
	return out, nil
}

// installed is the inventory of a slot as addSandbox makes it.
func (n *Network) installed(s *slotState) sbInventory {
	o, t := sbNames(s.Index), n.table()
	inv := sbInventory{
		elements: map[string]bool{natLinksMap: true, inLinksMap: true, fwdLinksMap: true},
		chains:   []string{o.nat, o.in, o.fwd},
		sets:     []string{o.allow, o.resolved},
	}
	for _, reason := range DenialReasons {
		inv.objects = append(inv.objects, &nftables.NamedObj{Table: t, Name: o.counter(reason), Type: nftables.ObjTypeCounter})
	}
	if n.cfg.Decide != nil {
		inv.objects = append(inv.objects, &nftables.NamedObj{Table: t, Name: o.limit, Type: nftables.ObjTypeLimit})
	}
	return inv
}

// sbInventory is which of a slot's nftables objects exist.
type sbInventory struct {
	elements     map[string]bool // map name -> has the link
	chains, sets []string
	objects      []*nftables.NamedObj // counters and the log limit
}

func (n *Network) inventory(c *nftables.Conn, s *slotState) (sbInventory, error) {
	inv := sbInventory{elements: map[string]bool{}}
	o := sbNames(s.Index)
	t := n.table()
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return inv, fmt.Errorf("listing chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name == t.Name && strings.HasPrefix(ch.Name, o.prefix) {
			inv.chains = append(inv.chains, ch.Name)
		}
	}
	sets, err := c.GetSets(t)
	if err != nil {
		return inv, fmt.Errorf("listing sets: %w", err)
	}
	key := ifname(s.HostLink)
	for _, set := range sets {
		switch {
		case strings.HasPrefix(set.Name, o.prefix):
			inv.sets = append(inv.sets, set.Name)
		case set.IsMap:
			els, err := c.GetSetElements(set)
			if err != nil {
				return inv, fmt.Errorf("listing %s: %w", set.Name, err)
			}
			for _, e := range els {
				if bytes.Equal(e.Key, key) {
					inv.elements[set.Name] = true
				}
			}
		}
	}
	objs, err := c.GetNamedObjects(t)
	if err != nil {
		return inv, fmt.Errorf("listing counters: %w", err)
	}
	for _, obj := range objs {
		if no, ok := obj.(*nftables.NamedObj); ok && strings.HasPrefix(no.Name, o.prefix) {
			inv.objects = append(inv.objects, &nftables.NamedObj{Table: t, Name: no.Name, Type: no.Type})
		}
	}
	return inv, nil
}
