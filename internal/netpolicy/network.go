package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
	"corral/internal/netpolicy/policy"
)

// Network is the host's sandbox networking: the shared table and every
// slot. It is safe for concurrent use.
type Network struct {
	cfg    Config
	log    *slog.Logger
	denied []span // always-denied IPv4 minus the operator's ranges

	hostnets atomic.Pointer[hostNets] // the host's networks (hostnet.go)
	watch    hostWatch

	mu     sync.RWMutex // guards the maps and serialises kernel changes
	slots  map[string]*slotState
	byAddr map[netip.Addr]*slotState
	closed bool

	nflog *nflogReader // nil without Config.Decide
}

// New prepares the host: state directories, IPv4 forwarding, and Corral's
// nftables table rebuilt from the recorded slots (which keep working). It
// removes Corral links and namespace mounts no slot records. With
// Config.Decide it binds Config.LogGroup first and reads denials from it
// until Close.
func New(ctx context.Context, cfg Config) (_ *Network, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("network config: %w", err)
	}
	n := &Network{cfg: cfg, log: cfg.Logger, denied: deniedSpans(cfg.OperatorAllowed),
		slots: map[string]*slotState{}, byAddr: map[netip.Addr]*slotState{}}
	for _, d := range []string{cfg.StateDir, cfg.netnsDir(), cfg.slotsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	states, err := loadStates(cfg)
	if err != nil {
		return nil, err
	}
	if err := n.checkHost(states); err != nil {
		return nil, err
	}
	hn, err := n.readHostNets()
	if err != nil {
		return nil, err
	}
	n.hostnets.Store(hn)
	if cfg.Decide != nil {
		// Bound before the rules exist, so no denial goes unread; the
		// messages wait in the socket until the reader starts.
		if n.nflog, err = openNFLOG(cfg.LogGroup, nflogRcvBuf, n.log); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				n.nflog.close()
			}
		}()
	}
	if err := writeSysctl("net/ipv4/ip_forward", "1"); err != nil {
		return nil, err
	}
	if err := n.rebuild(states); err != nil {
		return nil, err
	}
	for _, s := range states {
		n.register(s)
	}
	n.sweep()
	if n.nflog != nil {
		n.nflog.start(n.resolveDenial, cfg.Decide)
	}
	n.watchHost()
	n.log.Info("network ready", "op", "init", "table", cfg.Table, "pool", cfg.Pool.String(), "sandboxes", len(states),
		"log_group", cfg.LogGroup, "decisions", cfg.Decide != nil, "host_networks", hn.String())
	return n, nil
}

// resolveDenial maps a logged denial to its sandbox: the prefix names the
// slot and reason, and the source must be that slot's sandbox, so a slot
// reused between the log and its reading is not misattributed. A spoofed
// source names no sandbox: its slot (the link it came in on) does.
func (n *Network) resolveDenial(prefix string, src netip.Addr) (id, reason string, ok bool) {
	index, reason, ok := parseLogPrefix(prefix)
	if !ok {
		return "", "", false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if reason == DeniedSpoofed {
		for _, s := range n.slots {
			if s.Index == index && s.Addr != src {
				return s.ID, reason, true
			}
		}
		return "", "", false
	}
	s, ok := n.byAddr[src]
	if !ok || s.Index != index {
		return "", "", false
	}
	return s.ID, reason, true
}

// LostDecisions is how many logged denials the kernel could not deliver to
// the reader since New (its socket was full: Decide too slow, or a burst
// across many sandboxes). They were still refused and counted.
func (n *Network) LostDecisions() uint64 {
	if n.nflog == nil {
		return 0
	}
	return n.nflog.lost.Load()
}

// checkHost refuses a link prefix that other interfaces start with and a
// pool that overlaps a route or address the host already uses.
func (n *Network) checkHost(states []*slotState) error {
	links, err := dump(netlink.LinkList)
	if err != nil {
		return fmt.Errorf("listing links: %w", err)
	}
	ours := map[int]bool{}
	for _, l := range links {
		name := l.Attrs().Name
		if !strings.HasPrefix(name, n.cfg.LinkPrefix) {
			continue
		}
		if _, ok := n.parseLinkIndex(name); !ok || l.Type() != "veth" {
			return fmt.Errorf("link %s (%s) starts with the link prefix %q: %w", name, l.Type(), n.cfg.LinkPrefix, errdefs.ErrFailedPrecondition)
		}
		ours[l.Attrs().Index] = true
	}
	routes, err := dump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, unix.AF_INET) })
	if err != nil {
		return fmt.Errorf("listing routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil || ours[r.LinkIndex] {
			continue
		}
		dst, ok := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		if ok && ones > 0 && netip.PrefixFrom(dst.Unmap(), ones).Overlaps(n.cfg.Pool) {
			return fmt.Errorf("pool %v overlaps the host's route to %v: %w", n.cfg.Pool, r.Dst, errdefs.ErrFailedPrecondition)
		}
	}
	byIndex := map[uint32]string{}
	for _, s := range states {
		if other, dup := byIndex[s.Index]; dup {
			return fmt.Errorf("sandboxes %s and %s both record slot %d: %w", other, s.ID, s.Index, errdefs.ErrFailedPrecondition)
		}
		byIndex[s.Index] = s.ID
		if !n.cfg.Pool.Contains(s.Addr) {
			n.log.Warn("recorded sandbox outside the pool", "op", "init", "sandbox", s.ID, "addr", s.Addr.String())
		}
	}
	return nil
}

// parseLinkIndex returns the slot index a host link name encodes.
func (n *Network) parseLinkIndex(name string) (uint32, bool) {
	rest, ok := strings.CutPrefix(name, n.cfg.LinkPrefix)
	if !ok || rest == "" {
		return 0, false
	}
	var v uint32
	for _, r := range rest {
		switch {
		case r >= '0' && r <= '9':
			v = v<<4 | uint32(r-'0')
		case r >= 'a' && r <= 'f':
			v = v<<4 | uint32(r-'a'+10)
		default:
			return 0, false
		}
	}
	return v, name == n.cfg.hostLinkName(v) && v < slotCount(n.cfg.Pool)
}

// sweep removes Corral links and namespace mounts that no slot records
// (left by a crash before the state file was written or after it was
// removed). Failures are logged: they cost an index, not correctness.
func (n *Network) sweep() {
	links, err := dump(netlink.LinkList)
	if err != nil {
		n.log.Warn("listing links for sweep", "op", "sweep", "err", err)
	}
	leased := map[string]bool{}
	for _, s := range n.slots {
		leased[s.HostLink] = true
	}
	for _, l := range links {
		name := l.Attrs().Name
		if _, ok := n.parseLinkIndex(name); ok && !leased[name] && l.Type() == "veth" {
			n.log.Info("removing orphaned link", "op", "sweep", "link", name)
			if err := deleteLink(name); err != nil {
				n.log.Warn("removing orphaned link", "op", "sweep", "link", name, "err", err)
			}
		}
	}
	if tmps, err := filepath.Glob(filepath.Join(n.cfg.slotsDir(), ".*")); err == nil {
		for _, f := range tmps { // state files a crash left half-written
			os.Remove(f)
		}
	}
	ents, err := os.ReadDir(n.cfg.netnsDir())
	if err != nil {
		n.log.Warn("listing namespaces for sweep", "op", "sweep", "err", err)
	}
	for _, e := range ents {
		if _, ok := n.slots[e.Name()]; !ok {
			n.log.Info("removing orphaned namespace", "op", "sweep", "sandbox", e.Name())
			if err := removeNetns(filepath.Join(n.cfg.netnsDir(), e.Name())); err != nil {
				n.log.Warn("removing orphaned namespace", "op", "sweep", "sandbox", e.Name(), "err", err)
			}
		}
	}
}

func (n *Network) register(s *slotState) {
	n.slots[s.ID] = s
	n.byAddr[s.Addr] = s
}

func (n *Network) unregister(s *slotState) {
	delete(n.slots, s.ID)
	if n.byAddr[s.Addr] == s {
		delete(n.byAddr, s.Addr)
	}
}

// Lookup returns the sandbox that owns src, and its policy. The resolver
// and the proxy call it for every query and connection.
func (n *Network) Lookup(src netip.Addr) (id string, p policy.Policy, ok bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	s, ok := n.byAddr[src.Unmap()]
	if !ok {
		return "", policy.Policy{}, false
	}
	return s.ID, clonePolicy(s.Policy), true
}

// Slot returns the attachment of id.
func (n *Network) Slot(id string) (Slot, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	s, ok := n.slots[id]
	if !ok {
		return Slot{}, false
	}
	return s.Slot, true
}

// OperatorAllowed returns the ranges the operator re-opened, for the
// resolver and proxy's own policy.AllowsAddr calls.
func (n *Network) OperatorAllowed() []netip.Prefix { return slices.Clone(n.cfg.OperatorAllowed) }

// List returns the ids with state on the host, sorted, for reconcile: the
// daemon detaches those it no longer knows.
func (n *Network) List() ([]string, error) {
	return stateIDs(n.cfg)
}

// Close stops n from making further changes and stops the decision
// reader (no Decide call runs after Close returns). It leaves the table,
// the slots and forwarding in place: sandboxes outlive the daemon, and
// the next New adopts them.
func (n *Network) Close() error {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.stopReader() // outside mu: the reader takes it to resolve a denial
	n.stopWatch()  // outside mu: a resync takes it
	return nil
}

func (n *Network) stopReader() {
	if n.nflog != nil {
		n.nflog.close()
	}
}

// Teardown detaches every recorded sandbox and deletes Corral's table: for
// uninstalling, and for tests. Forwarding stays on (other software may
// rely on it).
func (n *Network) Teardown(ctx context.Context) error {
	ids, err := n.List()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := n.Detach(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("teardown: %w", errors.Join(errs...))
	}
	n.stopReader()
	n.stopWatch()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	return n.deleteTable()
}

func (n *Network) checkOpen() error {
	if n.closed {
		return fmt.Errorf("network is closed: %w", errdefs.ErrUnavailable)
	}
	return nil
}

func clonePolicy(p policy.Policy) policy.Policy {
	p.CIDRAllowlist = slices.Clone(p.CIDRAllowlist)
	p.DomainAllowlist = slices.Clone(p.DomainAllowlist)
	return p
}
