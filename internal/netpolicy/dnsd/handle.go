package dnsd

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"corral/internal/keylimit"
	"corral/internal/netpolicy/policy"
)

// Reasons recorded in DNS decisions.
const (
	ReasonBlocked      = "network blocked"
	ReasonNotAllowed   = "not in domain_allowlist"
	ReasonRebinding    = "internal address in answer"
	ReasonHostNetwork  = "host network address in answer"
	ReasonUpstreamFail = "upstream failed"
	ReasonTooMany      = "too many queries in flight"
	ReasonUpstreamRate = "over the sandbox's rate of queries forwarded upstream"
)

// serveTCPConn answers length-prefixed queries on c until it goes idle,
// fails, or ctx ends.
func (s *Server) serveTCPConn(ctx context.Context, c net.Conn, src netip.Addr) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var hdr [2]byte
	for {
		c.SetReadDeadline(time.Now().Add(tcpIdle))
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint16(hdr[:])
		if n == 0 || n > maxQuery {
			return
		}
		raw := make([]byte, n)
		if _, err := io.ReadFull(c, raw); err != nil {
			return
		}
		reply := s.handle(ctx, src, raw, true)
		if reply == nil {
			return
		}
		out := make([]byte, 2+len(reply))
		binary.BigEndian.PutUint16(out, uint16(len(reply)))
		copy(out[2:], reply)
		c.SetWriteDeadline(time.Now().Add(tcpIdle))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// handle answers one raw query from src: the packed reply, or nil when
// the query deserves no answer (a response, or not even a DNS header).
func (s *Server) handle(ctx context.Context, src netip.Addr, raw []byte, tcp bool) []byte {
	req := new(dns.Msg)
	if err := req.Unpack(raw); err != nil {
		if _, _, ok := s.cfg.Lookup(src); !ok {
			return nil
		}
		return formErr(raw)
	}
	if req.Response {
		return nil
	}
	size := replySize(req, tcp)
	sandboxID, p, ok := s.cfg.Lookup(src)
	if !ok {
		s.log.Debug("dns query from unknown source", "src", src)
		return s.reply(req, dns.RcodeRefused, size)
	}
	if req.Opcode != dns.OpcodeQuery {
		return s.reply(req, dns.RcodeNotImplemented, size)
	}
	if len(req.Question) != 1 {
		return s.reply(req, dns.RcodeFormatError, size)
	}
	q := req.Question[0]
	name := canonical(q.Name)
	decision := policy.Decision{SandboxID: sandboxID, Proto: "dns", Via: "dns", Domain: name}
	if p.BlockNetwork {
		s.decide(decision, false, ReasonBlocked)
		return s.reply(req, dns.RcodeRefused, size)
	}
	if q.Qclass != dns.ClassINET || q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		return s.reply(req, dns.RcodeRefused, size)
	}
	if !p.AllowsName(name) {
		s.decide(decision, false, ReasonNotAllowed)
		return s.reply(req, dns.RcodeNameError, size)
	}
	if !s.forwards.Allow(sandboxID, time.Now()) {
		s.decide(decision, false, ReasonUpstreamRate)
		return s.reply(req, dns.RcodeRefused, size)
	}
	if r := s.inflight.Acquire(sandboxID); r != keylimit.Granted {
		s.refused(decision, r)
		return s.reply(req, dns.RcodeServerFailure, size)
	}
	defer s.inflight.Release(sandboxID)
	resp, err := s.exchange(ctx, upstreamQuery(req))
	if err != nil {
		s.log.Info("dns forward failed", "sandbox", sandboxID, "name", name, "err", err)
		decision.Rcode = dns.RcodeToString[dns.RcodeServerFailure]
		s.decide(decision, true, ReasonUpstreamFail)
		return s.reply(req, dns.RcodeServerFailure, size)
	}
	if resp.Rcode != dns.RcodeSuccess {
		decision.Rcode = dns.RcodeToString[resp.Rcode]
	}
	s.decide(decision, true, "")
	s.filter(sandboxID, p, req.Question[0], resp)
	resp.Id = req.Id
	return s.pack(req, resp, size)
}

// upstreamQuery copies req under a fresh ID (the sandbox chooses its own,
// the upstream must not see a guessable one) with a bounded EDNS size.
func upstreamQuery(req *dns.Msg) *dns.Msg {
	q := req.Copy()
	q.Id = dns.Id()
	if opt := q.IsEdns0(); opt != nil && opt.UDPSize() > maxUDPReply {
		opt.SetUDPSize(maxUDPReply)
	}
	return q
}

// replySize is the largest reply the sandbox accepts on this transport.
func replySize(req *dns.Msg, tcp bool) int {
	if tcp {
		return dns.MaxMsgSize
	}
	if opt := req.IsEdns0(); opt != nil {
		return min(max(int(opt.UDPSize()), dns.MinMsgSize), maxUDPReply)
	}
	return dns.MinMsgSize
}

// refused reports a query refused by a bound on queries in flight, at
// most once a second per sandbox and bound.
func (s *Server) refused(d policy.Decision, r keylimit.Refusal) {
	report, n := s.reports.Allow(d.SandboxID+" "+r.String(), time.Now())
	if !report {
		return
	}
	d.Limit, d.Refused, d.LimitMax = r.String(), n, s.cfg.MaxInFlight
	if r == keylimit.RefusedShared {
		d.LimitMax = s.cfg.MaxInFlightTotal
	}
	s.decide(d, false, ReasonTooMany)
	s.log.Info("dns queries refused: sandbox over its share", "sandbox", d.SandboxID, "limit", d.Limit, "refused", n)
}

func (s *Server) decide(d policy.Decision, allowed bool, reason string) {
	d.Time = time.Now()
	d.Allowed = allowed
	d.Reason = reason
	s.cfg.Decide(d)
}

// reply packs an empty answer with rcode.
func (s *Server) reply(req *dns.Msg, rcode, size int) []byte {
	m := new(dns.Msg)
	m.SetRcode(req, rcode)
	m.RecursionAvailable = true
	return s.pack(req, m, size)
}

// pack truncates m to size (setting TC) and packs it; a message that will
// not pack becomes SERVFAIL.
func (s *Server) pack(req, m *dns.Msg, size int) []byte {
	m.Truncate(size)
	out, err := m.Pack()
	if err == nil {
		return out
	}
	s.log.Warn("packing dns reply", "err", err)
	f := new(dns.Msg)
	f.SetRcode(req, dns.RcodeServerFailure)
	out, err = f.Pack()
	if err != nil {
		return nil
	}
	return out
}

// formErr answers a query that does not parse with a bare FORMERR header,
// when there is a query header to answer.
func formErr(raw []byte) []byte {
	if len(raw) < 12 || raw[2]&0x80 != 0 {
		return nil
	}
	var h dns.MsgHdr
	h.Id = binary.BigEndian.Uint16(raw)
	h.Response = true
	h.Opcode = int(raw[2]>>3) & 0xF
	h.Rcode = dns.RcodeFormatError
	out, err := (&dns.Msg{MsgHdr: h}).Pack()
	if err != nil {
		return nil
	}
	return out
}

// canonical is a name as the policy and the cache see it: lowercase, no
// trailing dot.
func canonical(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// filter makes an upstream answer safe to hand to the sandbox and learns
// from it: always-denied A/AAAA records are dropped everywhere (DNS
// rebinding), TTLs are capped, address hints in SVCB/HTTPS records are
// dropped (so clients resolve A/AAAA, which are filtered and recorded)
// together with ECH configs in domain mode (so the SNI stays visible to
// the proxy). The A/AAAA answers on the CNAME chain of the question feed
// OnResolved and the cache.
func (s *Server) filter(sandboxID string, p policy.Policy, q dns.Question, resp *dns.Msg) {
	name := canonical(q.Name)
	d := policy.Decision{SandboxID: sandboxID, Proto: "dns", Via: "dns", Domain: name}
	domainMode := len(p.DomainAllowlist) > 0
	type drop struct {
		addr   netip.Addr
		reason string
	}
	var dropped []drop
	section := func(rrs []dns.RR) []dns.RR {
		out := rrs[:0]
		for _, rr := range rrs {
			if a, ok := rrAddr(rr); ok {
				if reason := s.deniedAnswer(a); reason != "" {
					dropped = append(dropped, drop{a, reason})
					continue
				}
			}
			s.sanitize(rr, domainMode)
			out = append(out, rr)
		}
		return out
	}
	resp.Answer = section(resp.Answer)
	resp.Ns = section(resp.Ns)
	resp.Extra = section(resp.Extra)
	for _, x := range dropped {
		d.Dst = x.addr
		s.decide(d, false, x.reason)
	}
	addrs, ttl := chainAddrs(q.Name, resp.Answer)
	if len(addrs) == 0 {
		return
	}
	open := max(ttl, s.cfg.MinOpen)
	s.cache.add(sandboxID, name, addrs, time.Now().Add(open))
	if s.cfg.OnResolved != nil {
		s.cfg.OnResolved(sandboxID, name, addrs, open)
	}
}

// deniedAnswer says why an answer's address must not reach a sandbox: an
// always-denied range the operator has not re-opened, or one of the
// host's own networks; "" when it may.
func (s *Server) deniedAnswer(a netip.Addr) string {
	switch {
	case policy.Denied(a, s.cfg.OperatorAllowed):
		return ReasonRebinding
	case s.cfg.HostNetwork != nil && s.cfg.HostNetwork(a):
		return ReasonHostNetwork
	}
	return ""
}

// sanitize caps rr's TTL and strips what a sandbox must not get from
// SVCB/HTTPS records.
func (s *Server) sanitize(rr dns.RR, domainMode bool) {
	h := rr.Header()
	if h.Rrtype == dns.TypeOPT {
		return // its "TTL" holds flags
	}
	if maxTTL := uint32(s.cfg.MaxTTL / time.Second); h.Ttl > maxTTL {
		h.Ttl = maxTTL
	}
	var svcb *dns.SVCB
	switch rr := rr.(type) {
	case *dns.SVCB:
		svcb = rr
	case *dns.HTTPS:
		svcb = &rr.SVCB
	default:
		return
	}
	kept := svcb.Value[:0]
	for _, kv := range svcb.Value {
		switch kv.Key() {
		case dns.SVCB_IPV4HINT, dns.SVCB_IPV6HINT:
			continue
		case dns.SVCB_ECHCONFIG:
			if domainMode {
				continue
			}
		}
		kept = append(kept, kv)
	}
	svcb.Value = kept
}

// rrAddr returns the address of an A or AAAA record.
func rrAddr(rr dns.RR) (netip.Addr, bool) {
	var ip net.IP
	switch rr := rr.(type) {
	case *dns.A:
		ip = rr.A
	case *dns.AAAA:
		ip = rr.AAAA
	default:
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		// Unpackable but empty: treat as the unspecified address, which
		// is always denied.
		return netip.IPv4Unspecified(), true
	}
	return a.Unmap(), true
}

// chainAddrs follows the CNAME chain from qname through answer and returns
// the A/AAAA addresses at its names and their smallest TTL.
func chainAddrs(qname string, answer []dns.RR) ([]netip.Addr, time.Duration) {
	chain := map[string]bool{strings.ToLower(dns.Fqdn(qname)): true}
	// Each pass adds at least one name or stops; a chain has at most
	// len(answer) links.
	for range answer {
		grew := false
		for _, rr := range answer {
			if c, ok := rr.(*dns.CNAME); ok && chain[strings.ToLower(c.Hdr.Name)] {
				if t := strings.ToLower(c.Target); !chain[t] {
					chain[t] = true
					grew = true
				}
			}
		}
		if !grew {
			break
		}
	}
	var addrs []netip.Addr
	minTTL := uint32(1<<32 - 1)
	seen := map[netip.Addr]bool{}
	for _, rr := range answer {
		a, ok := rrAddr(rr)
		if !ok || !chain[strings.ToLower(rr.Header().Name)] {
			continue
		}
		minTTL = min(minTTL, rr.Header().Ttl)
		if !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	return addrs, time.Duration(minTTL) * time.Second
}
