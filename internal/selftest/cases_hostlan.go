package selftest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"time"

	"corral/internal/selftest/probe"
)

// The host's LAN: for this case the host joins a network of its own, a
// namespace behind a veth whose host side has 198.51.100.209/29 (a
// non-private range, on-link, as a host's real LAN often is) with a
// neighbour at .210. The daemon must deny both the neighbour and the
// host's address there by default, as it denies the networks of every
// interface of the host, and say so in the sandbox's events. .211 has no
// one: it shows when the daemon has seen the new address (a connection to
// it is refused). The range is none of the world's (198.51.100.21, .254)
// nor the e2e tests' (198.51.100.200/29).
const (
	lanHostCIDR  = "198.51.100.209/29"
	lanHostAddr  = "198.51.100.209"
	lanNeighbour = "198.51.100.210"
	lanNobody    = "198.51.100.211"
	lanPort      = 8209
)

func reachHostLAN(ctx context.Context, s *session) Result {
	tried := fmt.Sprintf("TCP and UDP :%d to a neighbour on a LAN the host joins for the case (%s, host side %s) and to the host's own address there",
		lanPort, lanNeighbour, lanHostCIDR)
	lan, err := joinLAN(ctx, s)
	if err != nil {
		return inconclusive(tried, err)
	}
	defer lan.close()
	seen := s.waitLANDenied(ctx)
	payload := "lan-" + s.nonce
	targets := []probe.Target{tcp(lanNeighbour, lanPort), udp(lanNeighbour, lanPort), tcp(lanHostAddr, lanPort), udp(lanHostAddr, lanPort)}
	at, err := s.connectFrom(ctx, s.a, payload, targets...)
	if err != nil {
		return inconclusive(tried, err)
	}
	settle()
	var opened []string
	for _, a := range at {
		if a.OK && a.Target.Proto != "udp" {
			opened = append(opened, a.Target.Addr)
		}
	}
	neighbour, host := len(lan.neighbour.matching(payload)), len(lan.host.matching(payload))
	named := s.eventsName(ctx, s.a.id, "host_network", lanNeighbour)
	return verdict(len(opened) == 0 && neighbour == 0 && host == 0 && named, tried,
		"the daemon denied the new network after %s; TCP connections opened: %d (%s); the neighbour saw %d, the host's listener on %s %d; the events name the denial (host_network, %s): %v",
		seen, len(opened), joinMax(opened, 4), neighbour, lanHostAddr, host, lanNeighbour, named)
}

// lanWorld is the case's LAN and its two listeners.
type lanWorld struct {
	ns, link        string
	neighbour, host *recorder
	stops           []func()
}

func (l *lanWorld) close() {
	for i := len(l.stops) - 1; i >= 0; i-- {
		l.stops[i]()
	}
}

// joinLAN builds the LAN and starts the neighbour's listener (the probe's
// listen, in the namespace) and one on the host's address there.
func joinLAN(ctx context.Context, s *session) (_ *lanWorld, err error) {
	tag := randomTag(3)
	l := &lanWorld{ns: "cstl-" + tag, link: "cstl" + tag, neighbour: &recorder{}, host: &recorder{}}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	l.stops = append(l.stops, func() { _ = exec.Command("ip", "netns", "del", l.ns).Run() },
		func() { _ = exec.Command("ip", "link", "del", l.link).Run() })
	for _, step := range [][]string{
		{"netns", "add", l.ns},
		{"link", "add", l.link, "type", "veth", "peer", "name", "w0", "netns", l.ns},
		{"addr", "add", lanHostCIDR, "dev", l.link},
		{"link", "set", l.link, "up"},
		{"-n", l.ns, "link", "set", "lo", "up"},
		{"-n", l.ns, "addr", "add", lanNeighbour + "/29", "dev", "w0"},
		{"-n", l.ns, "link", "set", "w0", "up"},
	} {
		if err := ip(step...); err != nil {
			return nil, err
		}
	}
	port := fmt.Sprintf(":%d", lanPort)
	srv, cancel, err := listenInNetns(ctx, l.ns, s.w.probe, probe.ListenArgs{TCP: []string{port}, UDP: []string{port}, Label: "neighbour"}, l.neighbour)
	if err != nil {
		return nil, err
	}
	l.stops = append(l.stops, func() { cancel(); _ = srv.Wait() })
	stop, err := listenHost(net.JoinHostPort(lanHostAddr, fmt.Sprint(lanPort)), l.host)
	if err != nil {
		return nil, err
	}
	l.stops = append(l.stops, stop)
	return l, nil
}

// listenHost records TCP connections and UDP datagrams to addr, on the
// host.
func listenHost(addr string, rec *recorder) (func(), error) {
	tl, err := net.Listen("tcp4", addr)
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		tl.Close()
		return nil, err
	}
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				rec.add(probe.Seen{Label: "host-lan", Proto: "tcp", From: c.RemoteAddr().String(), Payload: strings.TrimSpace(line)})
			}()
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			rec.add(probe.Seen{Label: "host-lan", Proto: "udp", From: from.String(), Payload: strings.TrimSpace(string(buf[:n]))})
		}
	}()
	return func() { tl.Close(); pc.Close() }, nil
}

// waitLANDenied waits, up to 15 s, until a TCP connection from the
// attacker to the LAN's empty address is refused: the daemon has seen the
// host's new address and denies its network. It says how long that took
// (or that it never happened; the case's attempts then show what the
// sandbox reaches).
func (s *session) waitLANDenied(ctx context.Context) string {
	t0 := time.Now()
	for time.Since(t0) < 15*time.Second {
		at, err := s.connectFrom(ctx, s.a, "canary-"+s.nonce, tcp(lanNobody, lanPort))
		if err == nil && len(at) == 1 && !at[0].OK && strings.Contains(at[0].Err, "refused") {
			return time.Since(t0).Round(time.Millisecond).String()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "no refusal in 15 s"
}

// eventsName waits, up to 25 s, for an event of sandbox id whose message
// holds every one of words: a denial past the sandbox's detailed evidence
// for its window (the earlier cases spend some) is named in the window's
// fold report, written when the window (10 s) ends.
func (s *session) eventsName(ctx context.Context, id string, words ...string) bool {
	for deadline := time.Now().Add(25 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		evs, err := s.c.Events(ctx, id)
		if err != nil {
			return false
		}
		for _, e := range evs {
			all := true
			for _, w := range words {
				all = all && strings.Contains(e.Message, w)
			}
			if all {
				return true
			}
		}
	}
	return false
}
