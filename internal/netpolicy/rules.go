package netpolicy

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"corral/internal/netpolicy/policy"
)

// Denial reasons: one named counter per sandbox and reason.
const (
	DeniedBlocked   = "blocked"   // block_network
	DeniedInternal  = "internal"  // an always-denied range
	DeniedSandbox   = "sandbox"   // another sandbox
	DeniedAllowlist = "allowlist" // not in the CIDR allowlist / not a resolved address
	DeniedProtocol  = "protocol"  // IPv6, or a protocol the mode does not allow
	DeniedSpoofed   = "spoofed"   // a source address that is not the sandbox's
	DeniedHost      = "host"      // a host address or port other than resolver/proxy
	// DeniedHostNetwork: a network the host is on (its LAN, its other
	// links), whatever its range (hostnet.go).
	DeniedHostNetwork = "host_network"
)

// AllowedFlow is the log prefix's "reason" for an allowed new flow.
const AllowedFlow = "allowed"

// DenialReasons lists every reason, in counter order.
var DenialReasons = []string{DeniedBlocked, DeniedInternal, DeniedSandbox, DeniedAllowlist, DeniedProtocol, DeniedSpoofed, DeniedHost, DeniedHostNetwork}

// sbObjects are the names of one slot's nftables objects.
type sbObjects struct {
	prefix, nat, in, fwd, allow, resolved, limit string
}

func sbNames(index uint32) sbObjects {
	p := fmt.Sprintf("sb%x_", index)
	return sbObjects{prefix: p, nat: p + "nat", in: p + "in", fwd: p + "fwd", allow: p + "allow", resolved: p + "resolved", limit: p + "log"}
}

func (o sbObjects) counter(reason string) string { return o.prefix + reason }

// logPrefix is the NFLOG prefix of the slot's denials for reason, which
// parseLogPrefix reads back: the counter's name.
func (o sbObjects) logPrefix(reason string) string { return o.prefix + reason }

// logLimit is the slot's rate limit on logged denials, shared by its
// input and forward chains.
func logLimit() *expr.Limit {
	return &expr.Limit{Type: expr.LimitTypePkts, Rate: LogRate, Unit: expr.LimitTimeSecond, Burst: LogBurst}
}

// sbSets returns references to the slot's two sets.
func sbSets(t *nftables.Table, o sbObjects) (allow, resolved *nftables.Set) {
	allow = &nftables.Set{Table: t, Name: o.allow, Interval: true, KeyType: nftables.TypeIPAddr}
	resolved = &nftables.Set{Table: t, Name: o.resolved, HasTimeout: true, KeyType: nftables.TypeIPAddr}
	return allow, resolved
}

// addSandbox queues everything one slot needs: counters, sets, chains,
// rules and the map elements that send its link's traffic to the chains.
func (n *Network) addSandbox(c *nftables.Conn, r tableRefs, s *slotState, keep preserved) error {
	o := sbNames(s.Index)
	for _, reason := range DenialReasons {
		ctr := keep.counters[o.counter(reason)]
		c.AddObj(&nftables.NamedObj{Table: r.t, Name: o.counter(reason), Type: nftables.ObjTypeCounter, Obj: &ctr})
	}
	if n.cfg.Decide != nil {
		c.AddObj(&nftables.NamedObj{Table: r.t, Name: o.limit, Type: nftables.ObjTypeLimit, Obj: logLimit()})
	}
	allow, resolved := sbSets(r.t, o)
	if err := c.AddSet(allow, intervalElements(spansOf(s.Policy.CIDRAllowlist))); err != nil {
		return fmt.Errorf("adding set %s: %w", o.allow, err)
	}
	if err := c.AddSet(resolved, keep.resolved[o.resolved]); err != nil {
		return fmt.Errorf("adding set %s: %w", o.resolved, err)
	}
	chains := map[string]*nftables.Chain{}
	for _, name := range []string{o.nat, o.in, o.fwd} {
		chains[name] = c.AddChain(&nftables.Chain{Name: name, Table: r.t})
	}
	n.addSandboxRules(c, r, s, allow, resolved)
	key := ifname(s.HostLink)
	for _, m := range []struct {
		set   *nftables.Set
		chain string
	}{{r.natLinks, o.nat}, {r.inLinks, o.in}, {r.fwdLinks, o.fwd}} {
		el := nftables.SetElement{Key: key, VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: m.chain}}
		if err := c.SetAddElements(m.set, []nftables.SetElement{el}); err != nil {
			return fmt.Errorf("adding %s to map %s: %w", s.HostLink, m.set.Name, err)
		}
	}
	return nil
}

// addSandboxRules queues the rules of the slot's three (empty) chains.
func (n *Network) addSandboxRules(c *nftables.Conn, r tableRefs, s *slotState, allow, resolved *nftables.Set) {
	o := sbNames(s.Index)
	for chain, rules := range map[string][][]expr.Any{
		o.nat: n.natRules(s, r, allow, resolved),
		o.in:  n.inputRules(s),
		o.fwd: n.forwardRules(s, r, allow, resolved),
	} {
		ch := &nftables.Chain{Name: chain, Table: r.t}
		for _, e := range rules {
			c.AddRule(&nftables.Rule{Table: r.t, Chain: ch, Exprs: e})
		}
	}
}

// addressGate is the address part of the policy, shared by the nat and
// forward chains: each gate matches destinations the sandbox may not
// reach, with the reason. Both allowlists apply when both are set, as in
// policy.AllowsAddr. Only the forward chain knows the output link.
func (n *Network) addressGate(s *slotState, r tableRefs, allow, resolved *nftables.Set, routed bool) []gate {
	gates := []gate{{DeniedSandbox, ipInPrefix(ipDaddrOff, n.cfg.Pool)}}
	if routed {
		gates = append(gates, gate{DeniedSandbox, ifPrefix(expr.MetaKeyOIFNAME, n.cfg.LinkPrefix, true)})
	}
	gates = append(gates, gate{DeniedInternal, ipInSet(ipDaddrOff, r.denied, true)},
		gate{DeniedHostNetwork, ipInSet(ipDaddrOff, r.hostnet, true)})
	if len(s.Policy.CIDRAllowlist) > 0 {
		gates = append(gates, gate{DeniedAllowlist, ipInSet(ipDaddrOff, allow, false)})
	}
	if domainMode(s.Policy) {
		if routed { // the nat chain only sees TCP here
			gates = append(gates, gate{DeniedProtocol, l4proto(unix.IPPROTO_TCP, false)})
		}
		gates = append(gates, gate{DeniedAllowlist, ipInSet(ipDaddrOff, resolved, false)})
	}
	return gates
}

type gate struct {
	reason string
	match  []expr.Any
}

// natRules steer DNS to the resolver and allowed new TCP connections to
// the proxy. Nothing is steered in block mode.
func (n *Network) natRules(s *slotState, r tableRefs, allow, resolved *nftables.Set) [][]expr.Any {
	ret := verdict(expr.VerdictReturn)
	rules := [][]expr.Any{exprs(nfproto(unix.NFPROTO_IPV4, false), ret)}
	// Spoofed sources end here, before routing: the host link's strict
	// rp_filter would drop most of them without a trace.
	rules = append(rules, n.dropSpoofed(sbNames(s.Index), s)...)
	if s.Policy.BlockNetwork {
		return rules
	}
	if p := n.cfg.DNSPort; p != 0 {
		for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			rules = append(rules, exprs(l4proto(proto, true), dport(53), dnat(s.Gateway, p)))
		}
	}
	if n.cfg.ProxyPort == 0 {
		return rules
	}
	rules = append(rules, exprs(l4proto(unix.IPPROTO_TCP, false), ret), exprs(fibDaddrLocal(), ret))
	for _, g := range n.addressGate(s, r, allow, resolved, false) {
		rules = append(rules, exprs(g.match, ret))
	}
	return append(rules, dnat(s.Gateway, n.cfg.ProxyPort))
}

// inputRules admit, from the sandbox to the host, only the resolver and
// proxy ports on its own gateway.
func (n *Network) inputRules(s *slotState) [][]expr.Any {
	o := sbNames(s.Index)
	rules := [][]expr.Any{
		exprs(nfproto(unix.NFPROTO_IPV4, false), countDrop(o.counter(DeniedProtocol))),
		exprs(ipAddr(ipSaddrOff, s.Addr, false), countDrop(o.counter(DeniedSpoofed))),
		exprs(ctEstablished(), verdict(expr.VerdictAccept)),
	}
	if s.Policy.BlockNetwork {
		return append(rules, n.deny(o, DeniedBlocked, nil)...)
	}
	gw := ipAddr(ipDaddrOff, s.Gateway, true)
	if p := n.cfg.DNSPort; p != 0 {
		rules = append(rules,
			exprs(gw, l4proto(unix.IPPROTO_UDP, true), dport(p), verdict(expr.VerdictAccept)),
			exprs(gw, l4proto(unix.IPPROTO_TCP, true), dport(p), verdict(expr.VerdictAccept)))
	}
	if p := n.cfg.ProxyPort; p != 0 {
		// Only connections the nat chain steered: a sandbox dialing the
		// proxy port directly would make the proxy connect to itself.
		rules = append(rules, exprs(gw, l4proto(unix.IPPROTO_TCP, true), dport(p),
			ctBits(expr.CtKeySTATUS, ipsDstNAT), verdict(expr.VerdictAccept)))
	}
	return append(rules, n.deny(o, DeniedHost, nil)...)
}

// forwardRules apply the policy to what the sandbox sends through the host.
func (n *Network) forwardRules(s *slotState, r tableRefs, allow, resolved *nftables.Set) [][]expr.Any {
	o := sbNames(s.Index)
	rules := [][]expr.Any{
		exprs(nfproto(unix.NFPROTO_IPV4, false), countDrop(o.counter(DeniedProtocol))),
		exprs(ipAddr(ipSaddrOff, s.Addr, false), countDrop(o.counter(DeniedSpoofed))),
		exprs(ctEstablished(), verdict(expr.VerdictAccept)),
	}
	if s.Policy.BlockNetwork {
		return append(rules, n.deny(o, DeniedBlocked, nil)...)
	}
	for _, g := range n.addressGate(s, r, allow, resolved, true) {
		rules = append(rules, n.deny(o, g.reason, g.match)...)
	}
	rules = append(rules, n.allow(o, l4proto(unix.IPPROTO_TCP, true))...)
	if !domainMode(s.Policy) {
		rules = append(rules, n.allow(o, l4proto(unix.IPPROTO_UDP, true))...)
		rules = append(rules, n.allow(o, icmpEcho())...)
	}
	return append(rules, n.deny(o, DeniedProtocol, nil)...)
}

// allow accepts what match matches; with a decision reader, the first
// packet of each new flow is logged (within the slot's rate limit) so the
// allowed flows the proxy does not see (UDP, ICMP, TCP without a proxy)
// reach the event log too.
func (n *Network) allow(o sbObjects, match []expr.Any) [][]expr.Any {
	var rules [][]expr.Any
	if n.cfg.Decide != nil {
		rules = append(rules, exprs(match, ctNew(), logLimited(o.limit, n.cfg.LogGroup, o.logPrefix(AllowedFlow))))
	}
	return append(rules, exprs(match, verdict(expr.VerdictAccept)))
}

// deny refuses what match matches (nil: everything) for reason: with a
// decision reader, the first packet of a flow is logged to the NFLOG
// group, within the slot's rate limit, in a rule of its own (a packet over
// the limit ends only that rule); then every packet is counted and
// rejected, TCP with a reset and the rest with ICMP admin-prohibited.
func (n *Network) deny(o sbObjects, reason string, match []expr.Any) [][]expr.Any {
	var rules [][]expr.Any
	if n.cfg.Decide != nil {
		rules = append(rules, exprs(match, ctNew(), logLimited(o.limit, n.cfg.LogGroup, o.logPrefix(reason))))
	}
	ctr := o.counter(reason)
	return append(rules,
		exprs(match, l4proto(unix.IPPROTO_TCP, true), countReject(ctr, true)),
		exprs(match, countReject(ctr, false)))
}

// dropSpoofed drops (and counts) what the sandbox sends from an address
// that is not its own, first logging it (within the slot's log limit) so
// the decision reader reports it: "denied ... spoofed source A". It runs
// in the slot's prerouting (nat) chain, which sees every packet of a flow
// that was never confirmed, so every spoofed packet; the filter chains
// drop spoofed sources too, as a second line.
func (n *Network) dropSpoofed(o sbObjects, s *slotState) [][]expr.Any {
	spoofed := ipAddr(ipSaddrOff, s.Addr, false)
	var rules [][]expr.Any
	if n.cfg.Decide != nil {
		rules = append(rules, exprs(spoofed, logLimited(o.limit, n.cfg.LogGroup, o.logPrefix(DeniedSpoofed))))
	}
	return append(rules, exprs(spoofed, countDrop(o.counter(DeniedSpoofed))))
}

// domainMode: egress only to addresses the resolver answered with, TCP
// only (the proxy checks the name).
func domainMode(p policy.Policy) bool { return len(p.DomainAllowlist) > 0 }
