package netpolicy

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The host's own networks. Every IPv4 address on the host's interfaces,
// and the prefix it is on (192.0.2.2/24 puts the router and the
// neighbours of 192.0.2.0/24 there: the host's LAN, often a range the
// always-denied list does not hold), is denied to sandboxes whatever its
// range, at every enforcement point: the forward chain (the hostnet set,
// reason DeniedHostNetwork), and through HostNetwork the resolver's
// filter of answers and the egress proxy. Corral's own links (the
// gateways, in the pool) are left out: other sandboxes have rules of
// their own. Config.OperatorAllowed re-opens a network as it re-opens an
// always-denied range; the host's own addresses stay denied (the input
// chain and the proxy refuse them in any case).
//
// The set follows the host. A netlink subscription to IPv4 address
// changes resyncs at once, so an address the host gains is denied within
// milliseconds, not a polling period later; a periodic resync
// (hostResync) catches what the subscription can miss (the kernel drops
// notifications when its socket is full, and a failed subscription is
// made again). A resync that finds the networks changed replaces the
// set's elements in one nftables transaction, then cuts the sandboxes'
// flows to what became denied.

// hostResync is the period of the full resync behind the subscription.
const hostResync = 30 * time.Second

// hostSettle is how long a change waits for the rest of its burst before
// the set is read again: a new network is denied within it (it took
// 21-102 ms without), and a host where sandboxes of other daemons start
// by the dozen costs one resync a burst, not one a link.
const hostSettle = 100 * time.Millisecond

// hostNets is one reading of the host's networks.
type hostNets struct {
	nets  []netip.Prefix // every address's on-link prefix (masked) and the address itself, sorted
	spans []span         // what is denied: nets less the pool and the operator's ranges, plus the addresses
}

// ifAddr is one IPv4 address of a host interface.
type ifAddr struct {
	link   string       // the interface's name ("" when unknown)
	prefix netip.Prefix // the address with its prefix length
	peer   netip.Prefix // a point-to-point address's peer (invalid otherwise)
}

// hostNetsOf computes the denied networks from the host's addresses:
// those of Corral's own links (ours) and any in the pool are left out.
func hostNetsOf(addrs []ifAddr, ours func(link string) bool, pool netip.Prefix, operatorAllowed []netip.Prefix) *hostNets {
	var nets, own []netip.Prefix
	for _, a := range addrs {
		if !a.prefix.IsValid() || !a.prefix.Addr().Is4() || ours(a.link) || pool.Contains(a.prefix.Addr()) {
			continue
		}
		self := netip.PrefixFrom(a.prefix.Addr(), 32)
		own = append(own, self)
		nets = append(nets, self, a.prefix.Masked())
		if a.peer.IsValid() && a.peer.Addr().Is4() {
			nets = append(nets, a.peer.Masked())
		}
	}
	slices.SortFunc(nets, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	nets = slices.Compact(nets)
	open := spansOf(operatorAllowed)
	if pool.IsValid() {
		open = mergeSpans(append(open, spansOf([]netip.Prefix{pool})...))
	}
	spans := subtractSpans(spansOf(nets), open)
	return &hostNets{nets: nets, spans: mergeSpans(append(spans, spansOf(own)...))}
}

func (h *hostNets) equal(o *hostNets) bool {
	return h != nil && o != nil && slices.Equal(h.spans, o.spans)
}

func (h *hostNets) String() string {
	s := make([]string, len(h.nets))
	for i, p := range h.nets {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// listIfAddrs reads the host's IPv4 addresses and their interfaces'
// names. An address whose interface went away meanwhile has no name (and
// so is not taken for one of Corral's).
func listIfAddrs() ([]ifAddr, error) {
	as, err := dump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("listing the host's addresses: %w", err)
	}
	links, err := dump(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("listing the host's links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	out := make([]ifAddr, 0, len(as))
	for _, a := range as {
		out = append(out, ifAddr{link: names[a.LinkIndex], prefix: prefixOf(a.IPNet), peer: prefixOf(a.Peer)})
	}
	return out, nil
}

// prefixOf converts an IPv4 netlink address; anything else is invalid.
func prefixOf(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.Prefix{}
	}
	a, ok := netip.AddrFromSlice(n.IP)
	ones, bits := n.Mask.Size()
	if !ok || bits == 0 {
		return netip.Prefix{}
	}
	a = a.Unmap()
	if !a.Is4() || bits != 32 {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, ones)
}

// readHostNets lists the host's addresses and computes its networks.
func (n *Network) readHostNets() (*hostNets, error) {
	addrs, err := listIfAddrs()
	if err != nil {
		return nil, err
	}
	ours := func(link string) bool { _, ok := n.parseLinkIndex(link); return ok }
	return hostNetsOf(addrs, ours, n.cfg.Pool, n.cfg.OperatorAllowed), nil
}

// HostNetwork reports whether dst is one of the host's own addresses or
// on one of its networks that the operator has not re-opened: the
// resolver drops such addresses from answers and the egress proxy
// refuses them, as the forward chain does.
func (n *Network) HostNetwork(dst netip.Addr) bool {
	return spansContain(n.hostnets.Load().spans, dst)
}

// HostNetworks lists the host's networks as last read (the addresses'
// on-link prefixes and the addresses), for logs and tests.
func (n *Network) HostNetworks() []netip.Prefix {
	return slices.Clone(n.hostnets.Load().nets)
}

// syncHostNets reads the host's networks and, when they changed, puts
// them in the hostnet set (one transaction) and cuts the sandboxes'
// flows to the networks newly denied. Only New and the watcher call it,
// one at a time.
func (n *Network) syncHostNets(why string) error {
	next, err := n.readHostNets()
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	cur := n.hostnets.Load()
	if cur.equal(next) {
		return nil
	}
	c, err := newConn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	set := n.refs().hostnet
	c.FlushSet(set)
	if els := intervalElements(next.spans); len(els) > 0 {
		if err := c.SetAddElements(set, els); err != nil {
			return fmt.Errorf("filling %s: %w", hostnetSet, err)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("replacing %s: %w", hostnetSet, err)
	}
	n.hostnets.Store(next)
	n.log.Info("host networks changed", "op", "hostnet", "why", why, "networks", next.String())
	if added := subtractSpans(next.spans, cur.spans); len(added) > 0 {
		if cut, err := n.cutFlowsTo(added); err != nil {
			n.log.Warn("cutting flows to the host's networks", "op", "hostnet", "err", err)
		} else if cut > 0 {
			n.log.Info("cut flows to the host's networks", "op", "hostnet", "flows", cut)
		}
	}
	return nil
}

// cutFlowsTo deletes the conntrack entries of flows sandboxes started
// towards spans, so their next packet meets the rules; the caller holds
// n.mu.
func (n *Network) cutFlowsTo(spans []span) (uint, error) {
	match := flowFilter(func(f *netlink.ConntrackFlow) bool {
		src, _ := netip.AddrFromSlice(f.Forward.SrcIP)
		dst, _ := netip.AddrFromSlice(f.Forward.DstIP)
		_, sandbox := n.byAddr[src.Unmap()]
		return sandbox && spansContain(spans, dst)
	})
	return netlink.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(unix.AF_INET), match)
}

// hostWatch is the goroutine that keeps the hostnet set current.
type hostWatch struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// watchHost starts keeping the hostnet set current until stopWatch.
func (n *Network) watchHost() {
	n.watch.stop = make(chan struct{})
	n.watch.wg.Add(1)
	go func() {
		defer n.watch.wg.Done()
		n.watchLoop()
	}()
}

func (n *Network) stopWatch() {
	if n.watch.stop == nil {
		return
	}
	n.watch.once.Do(func() { close(n.watch.stop) })
	n.watch.wg.Wait()
}

func (n *Network) watchLoop() {
	tick := time.NewTicker(hostResync)
	defer tick.Stop()
	resync := func(why string) {
		if err := n.syncHostNets(why); err != nil {
			n.log.Warn("reading the host's networks", "op", "hostnet", "why", why, "err", err)
		}
	}
	var updates <-chan netlink.AddrUpdate
	unsubscribe := func() {}
	defer func() { unsubscribe() }()
	subscribe := func() {
		ch, cancel, err := n.subscribeAddrs()
		if err != nil {
			n.log.Warn("subscribing to the host's address changes; resyncing every period", "op", "hostnet", "err", err)
			return
		}
		updates, unsubscribe = ch, cancel
		// Changes made before the subscription took effect.
		resync("subscribed")
	}
	subscribe()
	var retry <-chan time.Time
	for {
		select {
		case <-n.watch.stop:
			return
		case <-tick.C:
			resync("periodic")
			if updates == nil && retry == nil {
				subscribe()
			}
		case <-retry:
			retry = nil
			subscribe()
		case u, ok := <-updates:
			if !ok {
				// The subscription ended (its socket overran or failed):
				// what it missed is read now, and it is made again.
				unsubscribe()
				updates, unsubscribe = nil, func() {}
				resync("subscription ended")
				retry = time.After(time.Second)
				continue
			}
			relevant := n.relevantUpdate(u)
			// One resync for a burst: the changes that come within
			// hostSettle of the first (another daemon's sandboxes
			// starting, an interface brought up with its addresses).
			settle := time.After(hostSettle)
			for settled := false; !settled; {
				select {
				case u, ok := <-updates:
					if !ok {
						settled = true
						break
					}
					relevant = relevant || n.relevantUpdate(u)
				case <-settle:
					settled = true
				}
			}
			if relevant {
				resync("address change")
			}
		}
	}
}

// relevantUpdate leaves out the changes of Corral's own gateways (every
// Attach and Detach makes one), which never change the set.
func (n *Network) relevantUpdate(u netlink.AddrUpdate) bool {
	p := prefixOf(&u.LinkAddress)
	return p.IsValid() && !n.cfg.Pool.Contains(p.Addr())
}

// subscribeAddrs subscribes to the host's address changes; cancel ends
// the subscription and waits for its reader.
func (n *Network) subscribeAddrs() (<-chan netlink.AddrUpdate, func(), error) {
	ch := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	err := netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{
		ErrorCallback: func(err error) {
			n.log.Debug("address subscription", "op", "hostnet", "err", err)
		},
		ReceiveBufferSize:      1 << 20,
		ReceiveBufferForceSize: true,
	})
	if err != nil {
		close(done)
		return nil, nil, err
	}
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			close(done)
			for range ch { // the reader may be blocked sending
			}
		})
	}
	return ch, cancel, nil
}

// hostnetElements are the hostnet set's elements for a table rebuild.
func (n *Network) hostnetElements() []nftables.SetElement {
	return intervalElements(n.hostnets.Load().spans)
}
