package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// acceptPair connects to dialAddr (l's address unless NAT changes that)
// and returns the side l accepted. It may run off the test goroutine.
func acceptPair(t *testing.T, l net.Listener, dialAddr string) (*net.TCPConn, error) {
	c, err := net.Dial("tcp", dialAddr)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	s, err := l.Accept()
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s.(*net.TCPConn), nil
}

// skipUntracked skips when conntrack does not track the connection: then
// the kernel has no original destination to report (ENOENT), or the
// option is not even registered (ENOPROTOOPT, no nf_conntrack).
func skipUntracked(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOPROTOOPT) {
		t.Skipf("conntrack does not track loopback connections in this network namespace: %v", err)
	}
}

// TestOriginalDstWithoutNAT: on a socket nothing was NATed for, the
// original destination is the local address (when conntrack tracks the
// host's loopback; TestOriginalDstDNAT checks the same in a namespace
// where it does).
func TestOriginalDstWithoutNAT(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "tcp6" {
				addr = "[::1]:0"
			}
			l, err := net.Listen(network, addr)
			if err != nil {
				t.Skipf("no %s loopback: %v", network, err)
			}
			defer l.Close()
			s, err := acceptPair(t, l, l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			got, err := OriginalDst(s)
			skipUntracked(t, err)
			if err != nil {
				t.Fatal(err)
			}
			if want := addrPortOf(s.LocalAddr()); got != want {
				t.Errorf("OriginalDst = %v, want the local address %v", got, want)
			}
		})
	}
}

// TestOriginalDstDNAT checks OriginalDst against a real DNAT, in a network
// namespace the test creates (root and nft needed): connections to
// 127.0.0.2:9999, [::1]:9999 and 127.0.0.3:9999 (to a dual-stack
// listener) are redirected to listeners elsewhere, and OriginalDst must
// report where they were going.
func TestOriginalDstDNAT(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace and nftables rules")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skip("needs the nft command")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// This goroutine's thread moves to a new network namespace and is
		// never unlocked, so the runtime discards it on exit.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		dnatInNetns(t, nft)
	}()
	<-done
}

func dnatInNetns(t *testing.T, nft string) {
	run := func(args ...string) error {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("ip", "link", "set", "lo", "up"); err != nil {
		t.Error(err)
		return
	}
	l4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Error(err)
		return
	}
	defer l4.Close()
	l6, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Error(err)
		return
	}
	defer l6.Close()
	// A dual-stack listener accepts IPv4 connections on IPv6 sockets.
	l46, err := net.Listen("tcp", "[::]:0")
	if err != nil {
		t.Error(err)
		return
	}
	defer l46.Close()
	p4, p6, p46 := l4.Addr().(*net.TCPAddr).Port, l6.Addr().(*net.TCPAddr).Port, l46.Addr().(*net.TCPAddr).Port
	rules := fmt.Sprintf(`table inet t {
	chain out {
		type nat hook output priority -100;
		ip daddr 127.0.0.2 tcp dport 9999 dnat ip to 127.0.0.1:%d
		ip6 daddr ::1 tcp dport 9999 dnat ip6 to [::1]:%d
		ip daddr 127.0.0.3 tcp dport 9999 dnat ip to 127.0.0.1:%d
	}
}`, p4, p6, p46)
	cmd := exec.Command(nft, "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("nft: %v: %s", err, out)
		return
	}
	for _, tc := range []struct {
		l    net.Listener
		dial string
	}{
		{l4, "127.0.0.2:9999"}, {l6, "[::1]:9999"}, {l46, "127.0.0.3:9999"},
		// Tracked but not NATed: the local address.
		{l4, l4.Addr().String()}, {l6, l6.Addr().String()},
	} {
		s, err := acceptPair(t, tc.l, tc.dial)
		if err != nil {
			t.Error(err)
			continue
		}
		got, err := OriginalDst(s)
		if err != nil {
			t.Errorf("OriginalDst: %v", err)
			continue
		}
		if want := netip.MustParseAddrPort(tc.dial); got != want {
			t.Errorf("OriginalDst = %v, want %v (accepted on %v)", got, want, s.LocalAddr())
		}
		t.Logf("dialed %s, accepted on %v, OriginalDst %v", tc.dial, s.LocalAddr(), got)
	}
}
