package netpolicy

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Small builders for nftables expressions, each the equivalent of one nft
// match or statement. They all use register 1 (and 2 for NAT ports).

const (
	ipSaddrOff = 12
	ipDaddrOff = 16
	// ipsDstNAT is IPS_DST_NAT in the conntrack status bits.
	ipsDstNAT = 1 << 5
)

func exprs(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ifname pads a link name to IFNAMSIZ as nftables compares it.
func ifname(name string) []byte {
	b := make([]byte, 16)
	copy(b, name)
	return b
}

// ifPrefix matches iifname/oifname "<prefix>*" (eq) or != "<prefix>*".
func ifPrefix(key expr.MetaKey, prefix string, eq bool) []expr.Any {
	op := expr.CmpOpEq
	if !eq {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: []byte(prefix)},
	}
}

// vmapJump is "<key> vmap @set".
func vmapJump(key expr.MetaKey, set *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: set.Name, SetID: set.ID},
	}
}

func nfproto(p byte, eq bool) []expr.Any {
	op := expr.CmpOpEq
	if !eq {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: []byte{p}},
	}
}

func l4proto(p byte, eq bool) []expr.Any {
	op := expr.CmpOpEq
	if !eq {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: []byte{p}},
	}
}

// isIPv4 is "meta nfproto ipv4": in an inet table it guards every IPv4
// header match (and lets nft list them as "ip saddr/daddr").
func isIPv4() []expr.Any { return nfproto(unix.NFPROTO_IPV4, true) }

// ipAddr is "ip saddr|daddr ==|!= a".
func ipAddr(off uint32, a netip.Addr, eq bool) []expr.Any {
	op := expr.CmpOpEq
	if !eq {
		op = expr.CmpOpNeq
	}
	return exprs(isIPv4(), []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Cmp{Op: op, Register: 1, Data: a.AsSlice()},
	})
}

// ipInPrefix is "ip saddr|daddr <prefix>".
func ipInPrefix(off uint32, p netip.Prefix) []expr.Any {
	mask := put32(^uint32(0) << (32 - p.Bits()))
	if p.Bits() == 0 {
		mask = [4]byte{}
	}
	return exprs(isIPv4(), []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask[:], Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()},
	})
}

// ipInSet is "ip saddr|daddr [!=] @set".
func ipInSet(off uint32, set *nftables.Set, in bool) []expr.Any {
	return exprs(isIPv4(), []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID, Invert: !in},
	})
}

// dport is "th dport p" (the caller matched the L4 protocol).
func dport(p uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(p)},
	}
}

// icmpEcho is "icmp type echo-request".
func icmpEcho() []expr.Any {
	return exprs(l4proto(unix.IPPROTO_ICMP, true), []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{8}},
	})
}

// ctBits matches any of the bits in mask of the conntrack state or status.
func ctBits(key expr.CtKey, mask uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: key},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

func ctEstablished() []expr.Any {
	return ctBits(expr.CtKeySTATE, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED)
}

// fibDaddrLocal is "fib daddr type local": any address of the host.
func fibDaddrLocal() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
	}
}

// dnat is "dnat ip to addr:port".
func dnat(a netip.Addr, port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a.AsSlice()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// countDrop is "counter name <c> drop": for IPv6 and spoofed sources,
// which get no answer.
func countDrop(counter string) []expr.Any {
	return []expr.Any{
		&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counter},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}

// countReject is "counter name <c> reject with tcp reset" (tcp, for TCP
// packets only) or "counter name <c> reject with icmpx admin-prohibited".
// The sender fails at once instead of waiting for its timeout.
func countReject(counter string, tcp bool) []expr.Any {
	r := &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}
	if tcp {
		r = &expr.Reject{Type: unix.NFT_REJECT_TCP_RST}
	}
	return []expr.Any{&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counter}, r}
}

// ctNew is "ct state new,untracked": the first packet of a flow.
func ctNew() []expr.Any { return ctBits(expr.CtKeySTATE, expr.CtStateBitNEW|expr.CtStateBitUNTRACKED) }

// logLimited is "limit name <limit> log group <group> prefix <prefix>
// snaplen <nflogCopyRange>". A packet over the limit ends the rule there.
func logLimited(limit string, group uint16, prefix string) []expr.Any {
	key := uint32(1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX | 1<<unix.NFTA_LOG_SNAPLEN)
	return []expr.Any{
		&expr.Objref{Type: int(nftables.ObjTypeLimit), Name: limit},
		&expr.Log{Key: key, Group: group, Data: []byte(prefix), Snaplen: nflogCopyRange},
	}
}

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }
