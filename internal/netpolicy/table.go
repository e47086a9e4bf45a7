package netpolicy

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Names of the shared objects in Corral's table.
const (
	natLinksMap = "nat_links" // iifname -> jump sb<i>_nat
	inLinksMap  = "in_links"  // iifname -> jump sb<i>_in
	fwdLinksMap = "fwd_links" // iifname -> jump sb<i>_fwd
	deniedSet   = "denied"    // policy.AlwaysDenied minus Config.OperatorAllowed
)

// tableRefs points at the shared table objects; in a batch that creates
// them the sets carry the batch IDs, otherwise only names.
type tableRefs struct {
	t                           *nftables.Table
	natLinks, inLinks, fwdLinks *nftables.Set
	denied                      *nftables.Set
}

func (n *Network) table() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: n.cfg.Table}
}

// refs names the shared objects of an existing table.
func (n *Network) refs() tableRefs {
	t := n.table()
	named := func(name string) *nftables.Set { return &nftables.Set{Table: t, Name: name} }
	return tableRefs{t: t, natLinks: named(natLinksMap), inLinks: named(inLinksMap),
		fwdLinks: named(fwdLinksMap), denied: named(deniedSet)}
}

// tableExists reports whether Corral's table is in the kernel.
func (n *Network) tableExists(c *nftables.Conn) (bool, error) {
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("listing tables: %w", err)
	}
	for _, t := range ts {
		if t.Name == n.cfg.Table {
			return true, nil
		}
	}
	return false, nil
}

// preserved is what a rebuild carries over from the old table.
type preserved struct {
	counters map[string]expr.Counter
	resolved map[string][]nftables.SetElement // set name -> elements
}

// snapshot reads the counters and resolved-address sets of the current
// table. Read errors only cost the carried-over values, so they are logged.
func (n *Network) snapshot(c *nftables.Conn, slots []*slotState) preserved {
	p := preserved{counters: map[string]expr.Counter{}, resolved: map[string][]nftables.SetElement{}}
	t := n.table()
	objs, err := c.GetNamedObjects(t)
	if err != nil {
		n.log.Warn("reading counters before rebuild", "op", "rebuild", "err", err)
	}
	for _, o := range objs {
		if no, ok := o.(*nftables.NamedObj); ok {
			if ctr, ok := no.Obj.(*expr.Counter); ok {
				p.counters[no.Name] = *ctr
			}
		}
	}
	for _, s := range slots {
		name := sbNames(s.Index).resolved
		elems, err := c.GetSetElements(&nftables.Set{Table: t, Name: name, KeyType: nftables.TypeIPAddr})
		if err != nil {
			continue // a slot recorded but never programmed
		}
		for _, e := range elems {
			if e.Expires > time.Second {
				p.resolved[name] = append(p.resolved[name], nftables.SetElement{Key: e.Key, Timeout: e.Expires})
			}
		}
	}
	return p
}

// rebuild replaces Corral's table with one built from the recorded slots,
// in one transaction, so traffic never sees a half-built table. A receive
// buffer overrun while reading the transaction's acks (ENOBUFS) leaves its
// outcome unknown; rebuilding again is safe, so it is retried.
func (n *Network) rebuild(slots []*slotState) error {
	var err error
	for try := 0; try < 3; try++ {
		if err = n.rebuildOnce(slots); !errors.Is(err, unix.ENOBUFS) {
			return err
		}
		n.cfg.Logger.Warn("nftables acks overran the socket buffer; rebuilding again", "op", "init", "try", try+1)
	}
	return err
}

func (n *Network) rebuildOnce(slots []*slotState) error {
	c, err := newConn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	exists, err := n.tableExists(c)
	if err != nil {
		return err
	}
	var keep preserved
	if exists {
		keep = n.snapshot(c, slots)
		c.DelTable(n.table())
	}
	refs, err := n.addBase(c)
	if err != nil {
		return err
	}
	for _, s := range slots {
		if err := n.addSandbox(c, refs, s, keep); err != nil {
			return err
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("installing table %s: %w", n.cfg.Table, err)
	}
	return nil
}

// addBase queues the table, its shared sets and its four base chains.
// Every base-chain rule matches only Corral's links; every policy is
// accept.
func (n *Network) addBase(c *nftables.Conn) (tableRefs, error) {
	t := c.AddTable(n.table())
	r := tableRefs{t: t}
	for _, m := range []struct {
		dst  **nftables.Set
		name string
	}{{&r.natLinks, natLinksMap}, {&r.inLinks, inLinksMap}, {&r.fwdLinks, fwdLinksMap}} {
		s := &nftables.Set{Table: t, Name: m.name, IsMap: true, KeyType: nftables.TypeIFName,
			KeyByteOrder: binaryutil.NativeEndian, DataType: nftables.TypeVerdict}
		if err := c.AddSet(s, nil); err != nil {
			return r, fmt.Errorf("adding map %s: %w", m.name, err)
		}
		*m.dst = s
	}
	r.denied = &nftables.Set{Table: t, Name: deniedSet, Interval: true, KeyType: nftables.TypeIPAddr}
	if err := c.AddSet(r.denied, intervalElements(n.denied)); err != nil {
		return r, fmt.Errorf("adding set %s: %w", deniedSet, err)
	}

	accept := nftables.ChainPolicyAccept
	chain := func(name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		return c.AddChain(&nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: prio, Policy: &accept})
	}
	add := func(ch *nftables.Chain, e ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs(e...)})
	}
	iif := func(eq bool) []expr.Any { return ifPrefix(expr.MetaKeyIIFNAME, n.cfg.LinkPrefix, eq) }
	oif := func(eq bool) []expr.Any { return ifPrefix(expr.MetaKeyOIFNAME, n.cfg.LinkPrefix, eq) }

	pre := chain("prerouting", nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest)
	add(pre, vmapJump(expr.MetaKeyIIFNAME, r.natLinks))

	post := chain("postrouting", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource)
	add(post, ipInPrefix(ipSaddrOff, n.cfg.Pool), oif(false), []expr.Any{&expr.Masq{}})

	in := chain("input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter)
	add(in, vmapJump(expr.MetaKeyIIFNAME, r.inLinks))
	add(in, iif(true), verdict(expr.VerdictDrop)) // a Corral link with no slot
	// The daemon's resolver and proxy listen on the wildcard address so
	// that every gateway reaches them; from anywhere but a Corral link
	// (the LAN, the host itself) they are closed.
	for _, svc := range []struct {
		proto byte
		port  uint16
	}{{unix.IPPROTO_UDP, n.cfg.DNSPort}, {unix.IPPROTO_TCP, n.cfg.DNSPort}, {unix.IPPROTO_TCP, n.cfg.ProxyPort}} {
		if svc.port != 0 {
			add(in, iif(false), l4proto(svc.proto, true), dport(svc.port), verdict(expr.VerdictDrop))
		}
	}

	fwd := chain("forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter)
	add(fwd, vmapJump(expr.MetaKeyIIFNAME, r.fwdLinks))
	add(fwd, iif(true), verdict(expr.VerdictDrop))
	add(fwd, oif(true), ctEstablished(), verdict(expr.VerdictAccept))
	add(fwd, oif(true), verdict(expr.VerdictDrop)) // nothing new into a sandbox
	return r, nil
}

// deleteTable removes Corral's table if it exists.
func (n *Network) deleteTable() error {
	c, err := newConn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	exists, err := n.tableExists(c)
	if err != nil || !exists {
		return err
	}
	c.DelTable(n.table())
	if err := c.Flush(); err != nil {
		return fmt.Errorf("deleting table %s: %w", n.cfg.Table, err)
	}
	return nil
}

// netlinkReadBuffer is the receive buffer asked for on nftables sockets
// (the kernel caps it at net.core.rmem_max): a transaction's acks for a
// host with many sandboxes overflow the default and fail with ENOBUFS.
const netlinkReadBuffer = 8 << 20

// newConn opens an nftables connection with a large receive buffer.
func newConn() (*nftables.Conn, error) {
	return nftables.New(nftables.WithSockOptions(func(c *netlink.Conn) error {
		_ = c.SetReadBuffer(netlinkReadBuffer) // best effort: the cap is the host's
		return nil
	}))
}
