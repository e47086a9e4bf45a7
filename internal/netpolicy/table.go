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
	hostnetSet  = "hostnet"   // the host's networks (hostnet.go)
)

// tableRefs points at the shared table objects; in a batch that creates
// them the sets carry the batch IDs, otherwise only names.
type tableRefs struct {
	t                           *nftables.Table
	natLinks, inLinks, fwdLinks *nftables.Set
	denied, hostnet             *nftables.Set
}

func (n *Network) table() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: n.cfg.Table}
}

// refs names the shared objects of an existing table.
func (n *Network) refs() tableRefs {
	t := n.table()
	named := func(name string) *nftables.Set { return &nftables.Set{Table: t, Name: name} }
	return tableRefs{t: t, natLinks: named(natLinksMap), inLinks: named(inLinksMap),
		fwdLinks: named(fwdLinksMap), denied: named(deniedSet), hostnet: named(hostnetSet)}
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
	c, err := newConnFor(len(slots))
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
	r.hostnet = &nftables.Set{Table: t, Name: hostnetSet, Interval: true, KeyType: nftables.TypeIPAddr}
	if err := c.AddSet(r.hostnet, n.hostnetElements()); err != nil {
		return r, fmt.Errorf("adding set %s: %w", hostnetSet, err)
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

// Socket buffers of nftables connections. Flush sends a transaction as
// one sendmsg, which fails with EMSGSIZE beyond the send buffer, and the
// kernel runs it inside that call, queueing an ack per message into the
// receive buffer (ENOBUFS when it overflows). A table rebuild is one
// transaction holding every sandbox: 12.8 KiB in 54 messages each
// (measured), so 6.4 MiB and 27,000 acks for 500 sandboxes, against a
// default send buffer of 208 KiB (net.core.wmem_default), which fitted
// about 16. Buffers are limits, not allocations.
const (
	netlinkBuffer     = 8 << 20  // every connection
	netlinkSlotBuffer = 64 << 10 // and per sandbox in a rebuild: its batch and its acks
)

// newConn opens an nftables connection with buffers for small transactions
// (one sandbox's objects) and any dump.
func newConn() (*nftables.Conn, error) { return newConnFor(0) }

// newConnFor opens an nftables connection whose buffers hold a transaction
// covering slots sandboxes.
func newConnFor(slots int) (*nftables.Conn, error) {
	size := netlinkBuffer + slots*netlinkSlotBuffer
	return nftables.New(nftables.WithSockOptions(func(c *netlink.Conn) error {
		setBuffers(c, size)
		return nil
	}))
}

// setBuffers sets both buffers of c to size, past the host's caps
// (net.core.wmem_max, rmem_max) with CAP_NET_ADMIN, which changing
// nftables needs anyway; without it, up to the caps (best effort: a
// transaction too large still fails, saying so).
func setBuffers(c *netlink.Conn, size int) {
	raw, err := c.SyscallConn()
	if err == nil {
		var serr error
		err = raw.Control(func(fd uintptr) {
			serr = errors.Join(
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size),
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size))
		})
		err = errors.Join(err, serr)
	}
	if err != nil {
		_ = c.SetWriteBuffer(size)
		_ = c.SetReadBuffer(size)
	}
}
