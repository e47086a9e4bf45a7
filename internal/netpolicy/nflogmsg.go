package netpolicy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"
)

// The NFNETLINK_LOG protocol (linux/netfilter/nfnetlink_log.h), which
// x/sys/unix does not define.
const (
	nfulnlMsgPacket = 0 // NFULNL_MSG_PACKET
	nfulnlMsgConfig = 1 // NFULNL_MSG_CONFIG

	nfulaPayload = 9  // NFULA_PAYLOAD: the packet from its network header
	nfulaPrefix  = 10 // NFULA_PREFIX: the rule's log prefix, NUL-terminated
	nfulaSeq     = 12 // NFULA_SEQ: the instance's sequence number, be32

	nfulaCfgCmd     = 1 // NFULA_CFG_CMD: struct nfulnl_msg_config_cmd
	nfulaCfgMode    = 2 // NFULA_CFG_MODE: struct nfulnl_msg_config_mode
	nfulaCfgQthresh = 5 // NFULA_CFG_QTHRESH: be32
	nfulaCfgFlags   = 6 // NFULA_CFG_FLAGS: be16

	nfulnlCfgCmdBind = 1 // NFULNL_CFG_CMD_BIND
	nfulnlCopyPacket = 2 // NFULNL_COPY_PACKET
	nfulnlCfgFSeq    = 1 // NFULNL_CFG_F_SEQ

	nlmsgHdrLen  = unix.SizeofNlMsghdr // 16
	nfgenHdrLen  = 4                   // struct nfgenmsg
	nlaHdrLen    = unix.SizeofNlAttr   // 4
	nlaTypeMask  = 0x3fff              // without NLA_F_NESTED, NLA_F_NET_BYTEORDER
	maxLogPrefix = 128                 // NF_LOG_PREFIXLEN, with the NUL
)

// nflogPacket is one logged packet of an NFLOG message. Payload aliases
// the receive buffer.
type nflogPacket struct {
	Prefix  string
	Seq     uint32
	HasSeq  bool
	Payload []byte
}

// parseNFLOG returns the packet messages of group in one datagram from an
// NFLOG socket, and how many messages it skipped as malformed. Other
// message types (an ack, NLMSG_DONE after a batch) and other groups are
// ignored. It never reads past b and stops at the first message whose
// length is impossible (the rest of the datagram cannot be framed).
func parseNFLOG(b []byte, group uint16) (pkts []nflogPacket, bad int) {
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < nlmsgHdrLen || l > len(b) {
			return pkts, bad + 1
		}
		typ := binary.NativeEndian.Uint16(b[4:6])
		msg := b[nlmsgHdrLen:l]
		b = b[min(nlmAlign(l), len(b)):]
		if typ != unix.NFNL_SUBSYS_ULOG<<8|nfulnlMsgPacket {
			continue
		}
		if len(msg) < nfgenHdrLen {
			bad++
			continue
		}
		if binary.BigEndian.Uint16(msg[2:4]) != group {
			continue
		}
		p, err := parsePacketAttrs(msg[nfgenHdrLen:])
		if err != nil {
			bad++
			continue
		}
		pkts = append(pkts, p)
	}
	return pkts, bad
}

func nlmAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// parsePacketAttrs reads the attributes of a packet message.
func parsePacketAttrs(b []byte) (nflogPacket, error) {
	var p nflogPacket
	for len(b) >= nlaHdrLen {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < nlaHdrLen || l > len(b) {
			return p, errors.New("bad attribute length")
		}
		data := b[nlaHdrLen:l]
		switch binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask {
		case nfulaPrefix:
			s, _, _ := strings.Cut(string(data[:min(len(data), maxLogPrefix-1)]), "\x00")
			p.Prefix = s
		case nfulaPayload:
			p.Payload = data
		case nfulaSeq:
			if len(data) != 4 {
				return p, errors.New("bad sequence attribute")
			}
			p.Seq, p.HasSeq = binary.BigEndian.Uint32(data), true
		}
		b = b[min(nlmAlign(l), len(b)):]
	}
	if p.Prefix == "" || p.Payload == nil {
		return p, errors.New("no prefix or payload")
	}
	return p, nil
}

// ipv4Summary is what a decision needs of a packet's headers.
type ipv4Summary struct {
	Proto    uint8
	Src, Dst netip.Addr
	Port     uint16 // TCP or UDP destination port; 0 otherwise
}

// parseIPv4 reads the IPv4 header at the start of b and, for the first
// fragment of a TCP or UDP packet, its destination port when b holds it.
func parseIPv4(b []byte) (ipv4Summary, error) {
	var s ipv4Summary
	if len(b) < 20 || b[0]>>4 != 4 {
		return s, errors.New("not an IPv4 header")
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || ihl > len(b) {
		return s, fmt.Errorf("bad IPv4 header length %d", ihl)
	}
	s.Proto = b[9]
	s.Src = netip.AddrFrom4([4]byte(b[12:16]))
	s.Dst = netip.AddrFrom4([4]byte(b[16:20]))
	fragOff := binary.BigEndian.Uint16(b[6:8]) & 0x1fff
	if (s.Proto == unix.IPPROTO_TCP || s.Proto == unix.IPPROTO_UDP) && fragOff == 0 && len(b) >= ihl+4 {
		s.Port = binary.BigEndian.Uint16(b[ihl+2 : ihl+4])
	}
	return s, nil
}

// protoName names an IP protocol as policy.Decision does.
func protoName(p uint8) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_ICMP:
		return "icmp"
	}
	return fmt.Sprintf("ipproto-%d", p)
}

// parseLogPrefix reads back sbObjects.logPrefix: "sb<hex index>_<reason>".
func parseLogPrefix(prefix string) (index uint32, reason string, ok bool) {
	rest, ok := strings.CutPrefix(prefix, "sb")
	if !ok {
		return 0, "", false
	}
	hex, reason, ok := strings.Cut(rest, "_")
	if !ok || hex == "" || len(hex) > 8 {
		return 0, "", false
	}
	for _, r := range hex {
		switch {
		case r >= '0' && r <= '9':
			index = index<<4 | uint32(r-'0')
		case r >= 'a' && r <= 'f':
			index = index<<4 | uint32(r-'a'+10)
		default:
			return 0, "", false
		}
	}
	if sbNames(index).logPrefix(reason) != prefix || !isReason(reason) {
		return 0, "", false
	}
	return index, reason, true
}

func isReason(r string) bool {
	if r == AllowedFlow {
		return true
	}
	for _, d := range DenialReasons {
		if d == r {
			return true
		}
	}
	return false
}

// nflogConfigMsg is the request that binds group to the sending socket
// with packet copies of copyRange bytes, per-instance sequence numbers (to
// count lost messages) and one message per packet (no batching delay).
func nflogConfigMsg(group uint16, copyRange uint32, seq uint32) []byte {
	attr := func(typ uint16, data ...byte) []byte {
		a := binary.NativeEndian.AppendUint16(nil, uint16(nlaHdrLen+len(data)))
		a = binary.NativeEndian.AppendUint16(a, typ)
		a = append(a, data...)
		return append(a, make([]byte, nlmAlign(len(a))-len(a))...)
	}
	body := []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, byte(group >> 8), byte(group)}
	body = append(body, attr(nfulaCfgCmd, nfulnlCfgCmdBind)...)
	mode := binary.BigEndian.AppendUint32(nil, copyRange)
	body = append(body, attr(nfulaCfgMode, append(mode, nfulnlCopyPacket, 0)...)...)
	body = append(body, attr(nfulaCfgQthresh, binary.BigEndian.AppendUint32(nil, 1)...)...)
	body = append(body, attr(nfulaCfgFlags, binary.BigEndian.AppendUint16(nil, nfulnlCfgFSeq)...)...)
	h := binary.NativeEndian.AppendUint32(nil, uint32(nlmsgHdrLen+len(body)))
	h = binary.NativeEndian.AppendUint16(h, unix.NFNL_SUBSYS_ULOG<<8|nfulnlMsgConfig)
	h = binary.NativeEndian.AppendUint16(h, unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	h = binary.NativeEndian.AppendUint32(h, seq)
	h = binary.NativeEndian.AppendUint32(h, 0)
	return append(h, body...)
}

// parseAck finds the kernel's answer to request seq in a datagram: found
// is false when the datagram holds none; err is the errno it carries.
func parseAck(b []byte, seq uint32) (found bool, err error) {
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < nlmsgHdrLen || l > len(b) {
			return false, nil
		}
		typ := binary.NativeEndian.Uint16(b[4:6])
		if typ == unix.NLMSG_ERROR && binary.NativeEndian.Uint32(b[8:12]) == seq && l >= nlmsgHdrLen+4 {
			if code := int32(binary.NativeEndian.Uint32(b[16:20])); code != 0 {
				return true, unix.Errno(-code)
			}
			return true, nil
		}
		b = b[min(nlmAlign(l), len(b)):]
	}
	return false, nil
}
