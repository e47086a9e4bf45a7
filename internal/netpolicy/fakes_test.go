package netpolicy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// Fakes standing in for the daemon's resolver and proxy (not under test
// here) and for the hosts a sandbox talks to.

// fakeProxy is a transparent TCP proxy on one gateway: it reads the
// original destination with SO_ORIGINAL_DST, dials it with the test's
// routing mark, and splices. It records the destinations it saw.
type fakeProxy struct {
	ln   net.Listener
	mark uint32
	mu   sync.Mutex
	seen []netip.AddrPort
	wg   sync.WaitGroup
}

func startProxy(t testing.TB, at netip.AddrPort, mark uint32) *fakeProxy {
	ln, err := net.Listen("tcp4", at.String())
	if err != nil {
		t.Fatalf("fake proxy: %v", err)
	}
	p := &fakeProxy{ln: ln, mark: mark}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *fakeProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c.(*net.TCPConn))
		}()
	}
}

func (p *fakeProxy) handle(down *net.TCPConn) {
	defer down.Close()
	dst, err := originalDst(down)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.seen = append(p.seen, dst)
	p.mu.Unlock()
	d := net.Dialer{Timeout: 2 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(p.mark)) })
		return errors.Join(err, serr)
	}}
	upc, err := d.Dial("tcp4", dst.String())
	if err != nil {
		return
	}
	up := upc.(*net.TCPConn)
	defer up.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(up, down)
		up.CloseWrite()
		close(done)
	}()
	io.Copy(down, up)
	down.CloseWrite()
	<-done
}

func (p *fakeProxy) saw(dst netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.seen {
		if s == dst {
			return true
		}
	}
	return false
}

// originalDst is the pre-DNAT destination of a redirected connection.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var out netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		// sockaddr_in fits IPv6Mreq's 20 bytes: family, port, address.
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		port := uint16(m.Multiaddr[2])<<8 | uint16(m.Multiaddr[3])
		out = netip.AddrPortFrom(netip.AddrFrom4([4]byte(m.Multiaddr[4:8])), port)
	})
	return out, errors.Join(err, serr)
}

// startDNSStub answers every UDP datagram on at with "dns:" + payload.
func startDNSStub(t testing.TB, at netip.AddrPort) {
	pc, err := net.ListenPacket("udp4", at.String())
	if err != nil {
		t.Fatalf("dns stub: %v", err)
	}
	t.Cleanup(func() { pc.Close() })
	go udpServe(pc, "dns:")
}

func udpServe(pc net.PacketConn, prefix string) {
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		pc.WriteTo(append([]byte(prefix), buf[:n]...), from)
	}
}

// startServers runs, inside the namespace at path, a TCP banner+echo
// server ("hello <name>\n", then echo) and a UDP echo server on each port,
// and, on discardPort, a TCP sink that replies with the byte count.
func startServers(t testing.TB, path, name string, discardPort uint16, ports ...uint16) {
	var closers []io.Closer
	err := inNetns(path, func() error {
		for _, p := range ports {
			ln, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", p))
			if err != nil {
				return err
			}
			pc, err := net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", p))
			if err != nil {
				return err
			}
			closers = append(closers, ln, pc)
			go tcpServe(ln, func(c net.Conn) { fmt.Fprintf(c, "hello %s\n", name); io.Copy(c, c) })
			go udpServe(pc, name+":")
		}
		if discardPort != 0 {
			ln, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", discardPort))
			if err != nil {
				return err
			}
			closers = append(closers, ln)
			go tcpServe(ln, sink)
		}
		return nil
	})
	t.Cleanup(func() {
		for _, c := range closers {
			c.Close()
		}
	})
	if err != nil {
		t.Fatalf("servers in %s: %v", name, err)
	}
}

func tcpServe(ln net.Listener, h func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() { defer c.Close(); h(c) }()
	}
}

// sink reads to EOF and answers with the number of bytes read.
func sink(c net.Conn) {
	n, _ := io.Copy(io.Discard, c)
	fmt.Fprintf(c, "%d\n", n)
}

// Client side, run inside a sandbox namespace.

// tcpHello dials dst from the namespace and returns the server's first line.
func tcpHello(ns string, dst netip.AddrPort, timeout time.Duration) (string, error) {
	var line string
	err := inNetns(ns, func() error {
		c, err := net.DialTimeout("tcp4", dst.String(), timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(timeout))
		line, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	return strings.TrimSpace(line), err
}

// udpAsk sends payload to dst from the namespace and returns the reply.
func udpAsk(ns string, dst netip.AddrPort, payload string, timeout time.Duration) (string, error) {
	var reply string
	err := inNetns(ns, func() error {
		c, err := net.Dial("udp4", dst.String())
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(timeout))
		if _, err := c.Write([]byte(payload)); err != nil {
			return err
		}
		buf := make([]byte, 2048)
		n, err := c.Read(buf)
		reply = string(buf[:n])
		return err
	})
	return reply, err
}

// ping sends one ICMP echo from the namespace and waits for the reply.
func ping(ns string, dst netip.Addr, timeout time.Duration) error {
	return inNetns(ns, func() error {
		c, err := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		if err != nil {
			return err
		}
		defer c.Close()
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 0x4321, Seq: 1, Data: []byte("corral")}}
		b, _ := msg.Marshal(nil)
		if _, err := c.WriteTo(b, &net.IPAddr{IP: net.IP(dst.AsSlice())}); err != nil {
			return err
		}
		c.SetDeadline(time.Now().Add(timeout))
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return err
			}
			m, err := icmp.ParseMessage(1, buf[:n])
			if err == nil && m.Type == ipv4.ICMPTypeEchoReply && from.String() == dst.String() {
				return nil
			}
		}
	})
}

// transfer sends size bytes from the namespace to a sink at dst and
// returns the elapsed time once the sink confirmed the count.
func transfer(ctx context.Context, ns string, dst netip.AddrPort, size int64) (time.Duration, error) {
	var c net.Conn
	err := inNetns(ns, func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp4", dst.String())
		return err
	})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	buf := make([]byte, 1<<20)
	for sent := int64(0); sent < size; {
		n, err := c.Write(buf[:min(int64(len(buf)), size-sent)])
		if err != nil {
			return 0, err
		}
		sent += int64(n)
	}
	c.(*net.TCPConn).CloseWrite()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	if got := strings.TrimSpace(line); got != fmt.Sprint(size) {
		return 0, fmt.Errorf("sink received %s bytes, want %d", got, size)
	}
	return time.Since(start), nil
}
