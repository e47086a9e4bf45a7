package probe

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// InfoResult describes the sandbox as its code sees it.
type InfoResult struct {
	Addrs    []string `json:"addrs"`   // IPv4 addresses, not loopback
	Gateway  string   `json:"gateway"` // the default route's gateway
	Hostname string   `json:"hostname"`
	BootID   string   `json:"boot_id"`
	Release  string   `json:"release"`
	UID      int      `json:"uid,omitempty"`
}

func info(json.RawMessage) (any, error) {
	r := InfoResult{UID: os.Getuid(), Gateway: defaultGateway()}
	r.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		r.BootID = strings.TrimSpace(string(b))
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		r.Release = unix.ByteSliceToString(u.Release[:])
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			r.Addrs = append(r.Addrs, p.Addr().String())
		}
	}
	return r, nil
}

// defaultGateway reads the default route from /proc/net/route.
func defaultGateway() string {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 3 || fields[1] != "00000000" {
			continue
		}
		v, err := strconv.ParseUint(fields[2], 16, 32)
		if err != nil || v == 0 {
			continue
		}
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(v))
		return netip.AddrFrom4(b).String()
	}
	return ""
}

// Target is one address a probe tries to reach.
type Target struct {
	Addr  string `json:"addr"`  // ip:port
	Proto string `json:"proto"` // tcp (default) or udp
}

// ConnectArgs are the arguments of the connect probe.
type ConnectArgs struct {
	Targets   []Target `json:"targets"`
	TimeoutMS int      `json:"timeout_ms,omitempty"`
	Payload   string   `json:"payload"` // sent on each connection or datagram
}

// Attempt is the outcome of one connection attempt.
type Attempt struct {
	Target Target `json:"target"`
	OK     bool   `json:"ok"` // connected (tcp) or sent (udp)
	Reply  string `json:"reply,omitempty"`
	Err    string `json:"err,omitempty"`
}

func connect(raw json.RawMessage) (any, error) {
	var a ConnectArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	timeout := time.Duration(a.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	out := make([]Attempt, len(a.Targets))
	var wg sync.WaitGroup
	for i, t := range a.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = attempt(t, timeout, a.Payload)
		}()
	}
	wg.Wait()
	return out, nil
}

func attempt(t Target, timeout time.Duration, payload string) Attempt {
	proto := t.Proto
	if proto == "" {
		proto = "tcp"
	}
	res := Attempt{Target: t}
	c, err := net.DialTimeout(proto, t.Addr, timeout)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(payload + "\n")); err != nil {
		res.Err = err.Error()
		return res
	}
	res.OK = true
	if proto == "tcp" {
		line, _ := bufio.NewReader(c).ReadString('\n')
		res.Reply = strings.TrimSpace(line)
	}
	return res
}

// ListenArgs are the arguments of the listen probe.
type ListenArgs struct {
	TCP []string `json:"tcp"` // listen addresses, e.g. ":80"
	UDP []string `json:"udp"`
	// Hold are TCP listen addresses whose connections are kept open
	// until the client closes them (and not reported one by one).
	Hold  []string `json:"hold"`
	Label string   `json:"label"` // written back on every TCP connection
}

// Seen is one connection or datagram a listener saw; listen prints one
// per line as it happens.
type Seen struct {
	Label   string `json:"label"`
	Proto   string `json:"proto"`
	From    string `json:"from"`
	Payload string `json:"payload,omitempty"`
}

// listen serves until killed, printing a Seen line for every connection
// and datagram, after a first line {"ready":true}.
func listen(raw json.RawMessage) (any, error) {
	var a ListenArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(v)
	}
	for _, addr := range a.TCP {
		l, err := net.Listen("tcp4", addr)
		if err != nil {
			return nil, err
		}
		go serveTCP(l, a.Label, emit)
	}
	for _, addr := range a.Hold {
		l, err := net.Listen("tcp4", addr)
		if err != nil {
			return nil, err
		}
		go holdTCP(l)
	}
	for _, addr := range a.UDP {
		pc, err := net.ListenPacket("udp4", addr)
		if err != nil {
			return nil, err
		}
		go serveUDP(pc, a.Label, emit)
	}
	emit(map[string]bool{"ready": true})
	select {}
}

func serveTCP(l net.Listener, label string, emit func(any)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			emit(Seen{Label: label, Proto: "tcp", From: c.RemoteAddr().String(), Payload: strings.TrimSpace(line)})
			_, _ = c.Write([]byte(label + "\n"))
		}()
	}
}

// holdTCP keeps every connection open until its client closes it.
func holdTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}()
	}
}

func serveUDP(pc net.PacketConn, label string, emit func(any)) {
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		emit(Seen{Label: label, Proto: "udp", From: from.String(), Payload: strings.TrimSpace(string(buf[:n]))})
	}
}

// RawArgs are the arguments of the rawsock probe: datagrams to Dst:Port
// whose IP source is each of Spoof.
type RawArgs struct {
	Dst     string   `json:"dst"`
	Port    int      `json:"port,omitempty"`
	Spoof   []string `json:"spoof"`
	Payload string   `json:"payload"`
}

// RawResult says which raw sockets opened and what was sent.
type RawResult struct {
	RawErr    string   `json:"raw_err,omitempty"`    // AF_INET/SOCK_RAW
	PacketErr string   `json:"packet_err,omitempty"` // AF_PACKET
	Sent      []string `json:"sent,omitempty"`       // spoofed sources sent
	SendErrs  []string `json:"send_errs,omitempty"`
}

func rawSocket(raw json.RawMessage) (any, error) {
	var a RawArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	var r RawResult
	if fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0x0300); err != nil {
		r.PacketErr = err.Error()
	} else {
		unix.Close(fd)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		r.RawErr = err.Error()
		return r, nil
	}
	defer unix.Close(fd)
	dst, err := netip.ParseAddr(a.Dst)
	if err != nil || !dst.Is4() {
		return nil, fmt.Errorf("dst %q is not an IPv4 address", a.Dst)
	}
	sa := &unix.SockaddrInet4{Addr: dst.As4()}
	for _, s := range a.Spoof {
		src, err := netip.ParseAddr(s)
		if err != nil || !src.Is4() {
			return nil, fmt.Errorf("spoof %q is not an IPv4 address", s)
		}
		pkt := udpPacket(src, dst, a.Port, []byte(a.Payload+"\n"))
		if err := unix.Sendto(fd, pkt, 0, sa); err != nil {
			r.SendErrs = append(r.SendErrs, s+": "+err.Error())
			continue
		}
		r.Sent = append(r.Sent, s)
	}
	return r, nil
}

// udpPacket builds an IPv4 header and a UDP datagram (checksum left 0,
// which IPv4 allows); the kernel fills the IP checksum for IPPROTO_RAW.
func udpPacket(src, dst netip.Addr, port int, payload []byte) []byte {
	total := 20 + 8 + len(payload)
	b := make([]byte, total)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(total))
	b[8] = 64
	b[9] = unix.IPPROTO_UDP
	s4, d4 := src.As4(), dst.As4()
	copy(b[12:16], s4[:])
	copy(b[16:20], d4[:])
	binary.BigEndian.PutUint16(b[20:], 40000)
	binary.BigEndian.PutUint16(b[22:], uint16(port))
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload)))
	copy(b[28:], payload)
	return b
}

// ConnsArgs are the arguments of the conns probe: open up to Max TCP
// connections to Addr (Parallel at a time) and hold them for HoldMS.
type ConnsArgs struct {
	Addr     string `json:"addr"`
	Max      int    `json:"max,omitempty"`
	Parallel int    `json:"parallel,omitempty"`
	HoldMS   int    `json:"hold_ms,omitempty"`
}

// ConnsResult counts the connections that opened and the first refusal.
type ConnsResult struct {
	Opened   int    `json:"opened,omitempty"`
	Failed   int    `json:"failed,omitempty"`
	FirstErr string `json:"first_err,omitempty"`
}

func holdConns(raw json.RawMessage) (any, error) {
	a := ConnsArgs{Parallel: 16}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		r     ConnsResult
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, max(a.Parallel, 1))
	for i := 0; i < a.Max; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := net.DialTimeout("tcp", a.Addr, 3*time.Second)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.Failed++
				if r.FirstErr == "" {
					r.FirstErr = err.Error()
				}
				return
			}
			conns = append(conns, c)
			r.Opened++
		}()
	}
	wg.Wait()
	time.Sleep(time.Duration(a.HoldMS) * time.Millisecond)
	for _, c := range conns {
		c.Close()
	}
	return r, nil
}

// errnoName is the symbolic name of err's errno, or its text.
func errnoName(err error) string {
	var e unix.Errno
	if errors.As(err, &e) {
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
	}
	return errString(err)
}
