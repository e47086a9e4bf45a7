package netpolicy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Builders of the messages the kernel sends, for the parser tests.

func nlAttr(typ uint16, data []byte) []byte {
	a := binary.NativeEndian.AppendUint16(nil, uint16(nlaHdrLen+len(data)))
	a = binary.NativeEndian.AppendUint16(a, typ)
	a = append(a, data...)
	return append(a, make([]byte, nlmAlign(len(a))-len(a))...)
}

func nlMsg(typ uint16, body []byte) []byte {
	h := binary.NativeEndian.AppendUint32(nil, uint32(nlmsgHdrLen+len(body)))
	h = binary.NativeEndian.AppendUint16(h, typ)
	h = binary.NativeEndian.AppendUint16(h, 0)
	h = append(h, make([]byte, 8)...)
	return append(h, body...)
}

// packetMsg is an NFULNL_MSG_PACKET as nfnetlink_log builds it: packet
// header, interface, payload, prefix, sequence number.
func packetMsg(group uint16, prefix string, payload []byte, seq uint32) []byte {
	body := []byte{unix.AF_INET, 0, byte(group >> 8), byte(group)}
	body = append(body, nlAttr(1, []byte{8, 0, 2, 0})...) // NFULA_PACKET_HDR
	body = append(body, nlAttr(4, binary.BigEndian.AppendUint32(nil, 7))...)
	body = append(body, nlAttr(nfulaPayload|unix.NLA_F_NET_BYTEORDER, payload)...)
	body = append(body, nlAttr(nfulaPrefix, append([]byte(prefix), 0))...)
	body = append(body, nlAttr(nfulaSeq, binary.BigEndian.AppendUint32(nil, seq))...)
	return nlMsg(unix.NFNL_SUBSYS_ULOG<<8|nfulnlMsgPacket, body)
}

// ipv4Packet is an IPv4 header (ihl words, so options when > 5) followed
// by the first bytes of a transport header with the given ports.
func ipv4Packet(proto uint8, src, dst netip.Addr, ihl int, dport uint16, fragOff uint16) []byte {
	b := make([]byte, ihl*4)
	b[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(b[6:8], fragOff)
	b[8], b[9] = 64, proto
	copy(b[12:16], src.AsSlice())
	copy(b[16:20], dst.AsSlice())
	b = binary.BigEndian.AppendUint16(b, 40000)
	return binary.BigEndian.AppendUint16(b, dport)
}

var (
	testSrc = netip.MustParseAddr("10.88.0.6")
	testDst = netip.MustParseAddr("10.99.0.10")
)

func TestParseNFLOG(t *testing.T) {
	tcp := ipv4Packet(unix.IPPROTO_TCP, testSrc, testDst, 5, 7, 0)
	datagram := bytes.Join([][]byte{
		packetMsg(7717, "sb1_internal", tcp, 4),
		packetMsg(7718, "sb1_internal", tcp, 5),          // another group
		nlMsg(unix.NLMSG_DONE, []byte{0, 0, 0, 0}),       // end of a batch
		packetMsg(7717, "sb1_host", tcp[:20], 6),         // no transport header
		nlMsg(unix.NFNL_SUBSYS_ULOG<<8, []byte{2, 0, 0}), // short nfgenmsg
		packetMsg(7717, "", tcp, 7),                      // no prefix
	}, nil)
	pkts, bad := parseNFLOG(datagram, 7717)
	if len(pkts) != 2 || bad != 2 {
		t.Fatalf("parseNFLOG = %d packets, %d bad; want 2, 2", len(pkts), bad)
	}
	if p := pkts[0]; p.Prefix != "sb1_internal" || !p.HasSeq || p.Seq != 4 || !bytes.Equal(p.Payload, tcp) {
		t.Errorf("first packet %+v", p)
	}
	if p := pkts[1]; p.Prefix != "sb1_host" || p.Seq != 6 {
		t.Errorf("second packet %+v", p)
	}
	// A length running past the datagram stops the parse there.
	cut := packetMsg(7717, "sb1_internal", tcp, 8)
	binary.NativeEndian.PutUint32(cut[0:4], uint32(len(cut)+4))
	if pkts, bad := parseNFLOG(append(packetMsg(7717, "sb2_host", tcp, 1), cut...), 7717); len(pkts) != 1 || bad != 1 {
		t.Errorf("overlong message: %d packets, %d bad", len(pkts), bad)
	}
}

func TestParseIPv4(t *testing.T) {
	tests := []struct {
		name    string
		b       []byte
		want    ipv4Summary
		wantErr bool
	}{
		{"tcp", ipv4Packet(unix.IPPROTO_TCP, testSrc, testDst, 5, 443, 0), ipv4Summary{unix.IPPROTO_TCP, testSrc, testDst, 443}, false},
		{"udp with options", ipv4Packet(unix.IPPROTO_UDP, testSrc, testDst, 15, 53, 0), ipv4Summary{unix.IPPROTO_UDP, testSrc, testDst, 53}, false},
		{"later fragment", ipv4Packet(unix.IPPROTO_UDP, testSrc, testDst, 5, 53, 0x2010), ipv4Summary{unix.IPPROTO_UDP, testSrc, testDst, 0}, false},
		{"icmp", ipv4Packet(unix.IPPROTO_ICMP, testSrc, testDst, 5, 0x0800, 0), ipv4Summary{unix.IPPROTO_ICMP, testSrc, testDst, 0}, false},
		{"header only", ipv4Packet(unix.IPPROTO_TCP, testSrc, testDst, 5, 80, 0)[:20], ipv4Summary{unix.IPPROTO_TCP, testSrc, testDst, 0}, false},
		{"short", make([]byte, 19), ipv4Summary{}, true},
		{"ipv6", append([]byte{0x60}, make([]byte, 39)...), ipv4Summary{}, true},
		{"ihl too small", append([]byte{0x44}, make([]byte, 39)...), ipv4Summary{}, true},
		{"ihl past the end", ipv4Packet(unix.IPPROTO_TCP, testSrc, testDst, 15, 80, 0)[:40], ipv4Summary{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseIPv4(tt.b)
			if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
				t.Errorf("parseIPv4 = %+v, %v; want %+v, err %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseLogPrefix(t *testing.T) {
	for _, i := range []uint32{0, 1, 0xa, 0x3fff, 1<<32 - 1} {
		for _, reason := range DenialReasons {
			idx, r, ok := parseLogPrefix(sbNames(i).logPrefix(reason))
			if !ok || idx != i || r != reason {
				t.Errorf("parseLogPrefix(%s) = %d, %q, %v", sbNames(i).logPrefix(reason), idx, r, ok)
			}
		}
	}
	for _, p := range []string{"", "sb", "sb_internal", "sb1", "sb1_", "sb1_nat", "sb01_internal", "sbA_internal",
		"sb100000000_internal", "xb1_internal", "sb1_internal\x00", "sb-1_host"} {
		if _, _, ok := parseLogPrefix(p); ok {
			t.Errorf("parseLogPrefix(%q) accepted", p)
		}
	}
}

func TestConfigMessages(t *testing.T) {
	msg := nflogConfigMsg(7717, nflogCopyRange, 3)
	if got := binary.NativeEndian.Uint32(msg[0:4]); int(got) != len(msg) {
		t.Errorf("length field %d, message %d bytes", got, len(msg))
	}
	if typ := binary.NativeEndian.Uint16(msg[4:6]); typ != 0x0401 {
		t.Errorf("type %#x, want NFNL_SUBSYS_ULOG/NFULNL_MSG_CONFIG", typ)
	}
	if group := binary.BigEndian.Uint16(msg[18:20]); group != 7717 {
		t.Errorf("res_id %d", group)
	}
	ack := func(seq uint32, code int32) []byte {
		body := binary.NativeEndian.AppendUint32(nil, uint32(code))
		m := nlMsg(unix.NLMSG_ERROR, append(body, msg[:nlmsgHdrLen]...))
		binary.NativeEndian.PutUint32(m[8:12], seq)
		return m
	}
	if found, err := parseAck(ack(3, 0), 3); !found || err != nil {
		t.Errorf("ack: %v, %v", found, err)
	}
	if found, err := parseAck(append(packetMsg(7717, "sb0_host", nil, 0), ack(3, -int32(unix.EBUSY))...), 3); !found || !errors.Is(err, unix.EBUSY) {
		t.Errorf("busy: %v, %v", found, err)
	}
	if found, _ := parseAck(ack(2, 0), 3); found {
		t.Error("ack of another request accepted")
	}
}

// TestSequenceGaps: a gap in the kernel's numbering counts lost messages;
// the numbering wraps; a step back (a new instance) is not a loss.
func TestSequenceGaps(t *testing.T) {
	r := &nflogReader{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, seq := range []uint32{10, 11, 15, 16, 1<<32 - 2, 1<<32 - 1, 0, 3, 1, 2} {
		r.countSeq(nflogPacket{Seq: seq, HasSeq: true})
	}
	r.countSeq(nflogPacket{}) // no sequence number: nothing to count
	if got := r.lost.Load(); got != 3+2 {
		t.Errorf("lost = %d, want 5", got)
	}
}

// FuzzParseNFLOG: any datagram parses without panicking or reading past
// its end, and what comes out stays within the kernel's bounds.
func FuzzParseNFLOG(f *testing.F) {
	tcp := ipv4Packet(unix.IPPROTO_TCP, testSrc, testDst, 5, 7, 0)
	f.Add(packetMsg(7717, "sb1_internal", tcp, 1))
	f.Add(append(packetMsg(7717, "sb2_host", tcp[:20], 2), nlMsg(unix.NLMSG_DONE, make([]byte, 4))...))
	f.Add(packetMsg(7717, strings.Repeat("x", 200), ipv4Packet(unix.IPPROTO_UDP, testSrc, testDst, 15, 53, 0), 3))
	f.Add(nflogConfigMsg(7717, 64, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		pkts, bad := parseNFLOG(b, 7717)
		if bad < 0 || len(pkts)*(nlmsgHdrLen+nfgenHdrLen) > len(b) {
			t.Fatalf("%d packets, %d bad from %d bytes", len(pkts), bad, len(b))
		}
		for _, p := range pkts {
			if p.Prefix == "" || len(p.Prefix) >= maxLogPrefix || strings.ContainsRune(p.Prefix, 0) || len(p.Payload) > len(b) {
				t.Fatalf("packet out of bounds: %q, %d payload bytes", p.Prefix, len(p.Payload))
			}
			if ip, err := parseIPv4(p.Payload); err == nil && (!ip.Src.Is4() || !ip.Dst.Is4()) {
				t.Fatalf("parseIPv4 = %+v", ip)
			}
			if i, reason, ok := parseLogPrefix(p.Prefix); ok && sbNames(i).logPrefix(reason) != p.Prefix {
				t.Fatalf("parseLogPrefix(%q) = %d, %q", p.Prefix, i, reason)
			}
		}
		parseAck(b, 1)
	})
}
