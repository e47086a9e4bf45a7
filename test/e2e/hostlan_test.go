package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/cgroups"
)

// The host's own LAN: a namespace joined to the host by a veth whose host
// side is 198.51.100.201/29 (a non-private range, on-link), with a
// neighbour at .202. No other world uses 198.51.100.200/29 (the e2e
// world: .1, .9, .254; the secrets world: .33, .34, .250; the usage
// server: .129, .190; the selftest: .21, .209/29, .254; the unit tests:
// .217/29, .225/29, .252-.254).
const (
	lanNet       = "198.51.100.200/29"
	lanHost      = "198.51.100.201" // the host's address on the LAN
	lanNeighbour = "198.51.100.202"
	lanPort      = 8201 // TCP and UDP, at the neighbour and at the host's address
)

// lanSeen records what reached a listener: "tcp <from>" or "udp <from>".
type lanSeen struct {
	mu   sync.Mutex
	seen []string
}

func (s *lanSeen) add(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, what)
}

func (s *lanSeen) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// listenLAN serves TCP and UDP on addr (in namespace ns when not ""),
// answering "<label>" and recording each connection or datagram.
func listenLAN(t *testing.T, ns, addr, label string) *lanSeen {
	t.Helper()
	seen := &lanSeen{}
	var l net.Listener
	var pc net.PacketConn
	listen := func() (err error) {
		if l, err = net.Listen("tcp4", addr); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", addr)
		return err
	}
	if ns != "" {
		inNS(t, ns, listen)
	} else if err := listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); pc.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			seen.add("tcp " + c.RemoteAddr().String())
			c.Write([]byte(label + "\n"))
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			seen.add("udp " + from.String() + " " + string(buf[:n]))
			pc.WriteTo([]byte(label+"\n"), from)
		}
	}()
	return seen
}

// hostLAN joins the host to the LAN and starts the listeners: the
// neighbour's (in the namespace) and one on the host's LAN address.
func hostLAN(t *testing.T) (neighbour, host *lanSeen) {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	name := "cwl" + hex.EncodeToString(b)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	run(t, "ip", "link", "add", name, "type", "veth", "peer", "name", "w0", "netns", name)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	run(t, "ip", "addr", "add", lanHost+"/29", "dev", name)
	run(t, "ip", "link", "set", name, "up")
	run(t, "ip", "-n", name, "addr", "add", lanNeighbour+"/29", "dev", "w0")
	run(t, "ip", "-n", name, "link", "set", "w0", "up")
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	neighbour = listenLAN(t, name, net.JoinHostPort(lanNeighbour, strconv.Itoa(lanPort)), "neighbour")
	host = listenLAN(t, "", net.JoinHostPort(lanHost, strconv.Itoa(lanPort)), "host")
	return neighbour, host
}

// lanProbe tries TCP and UDP to the neighbour and to the host's LAN
// address from inside the sandbox; each result is "answered <reply>" or
// the error.
const lanProbe = `
import json, socket, sys
out = {}
for host in sys.argv[1:]:
    for proto in ("tcp", "udp"):
        kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
        s = socket.socket(socket.AF_INET, kind)
        s.settimeout(3)
        try:
            s.connect((host, 8201))
            if proto == "udp":
                s.send(b"probe")
            out[proto + " " + host] = "answered " + s.recv(64).decode().strip()
        except Exception as e:
            out[proto + " " + host] = type(e).__name__ + ": " + str(e)
        s.close()
print(json.dumps(out))
`

func (d *daemon) probeLAN(t *testing.T, id string) map[string]string {
	t.Helper()
	out := d.mustCLI("exec", id, "--", "python3", "-c", lanProbe, lanNeighbour, lanHost)
	var res map[string]string
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("probe output %q: %v", out, err)
	}
	return res
}

// waitHostnetSet waits until the daemon's hostnet set holds the LAN (or
// no longer does): the daemon saw the host's new address.
func (d *daemon) waitHostnetSet(t *testing.T, want bool) {
	t.Helper()
	waitFor(t, 10*time.Second, "the hostnet set to follow the LAN", func() bool {
		out, err := exec.Command("nft", "list", "set", "inet", d.flag("--net-table"), "hostnet").Output()
		return err == nil && strings.Contains(string(out), lanNet) == want
	})
}

// TestHostLAN: the networks the host's own interfaces are on are denied
// to sandboxes whatever their range, on both runtimes: a neighbour on the
// host's LAN (TCP and UDP) and the host's own address there are refused,
// the listeners see nothing, and the events name the denial. A daemon
// started with --allow-range <the LAN> lets a sandbox reach the
// neighbour, never the host's address. The daemon's oom_score_adj is below
// every process of a running sandbox.
func TestHostLAN(t *testing.T) {
	t.Parallel()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	t.Run("denied", func(t *testing.T) {
		d := startDaemon(t)
		// The LAN appears while the daemon runs: its address subscription
		// must put it in the set.
		neighbour, host := hostLAN(t)
		d.waitHostnetSet(t, true)
		for _, rt := range runtimes {
			t.Run(rt, func(t *testing.T) {
				id := d.create("--runtime", rt)
				assertDaemonOOMBelow(t, d, rt, id)
				res := d.probeLAN(t, id)
				for what, got := range res {
					if strings.HasPrefix(got, "answered") {
						t.Errorf("%s reached: %s", what, got)
					}
					if strings.HasPrefix(what, "tcp") && !strings.Contains(got, "ConnectionRefused") {
						t.Errorf("%s: %s; want refused at once", what, got)
					}
				}
				t.Logf("%s: %v", rt, res)
				want := []string{"denied tcp " + lanNeighbour + ":8201: host_network", "denied udp " + lanNeighbour + ":8201: host_network",
					"denied tcp " + lanHost + ":8201: host"}
				d.waitEvents(t, id, want)
			})
		}
		if s := neighbour.get(); len(s) > 0 {
			t.Errorf("the neighbour saw %v", s)
		}
		if s := host.get(); len(s) > 0 {
			t.Errorf("the host's LAN listener saw %v", s)
		}
	})
	t.Run("allow-range", func(t *testing.T) {
		neighbour, host := hostLAN(t)
		d := startDaemon(t, "--allow-range", lanNet)
		d.waitHostnetSet(t, false)
		for _, rt := range runtimes {
			t.Run(rt, func(t *testing.T) {
				id := d.create("--runtime", rt)
				res := d.probeLAN(t, id)
				for _, proto := range []string{"tcp", "udp"} {
					if got := res[proto+" "+lanNeighbour]; got != "answered neighbour" {
						t.Errorf("%s to the re-opened neighbour: %s", proto, got)
					}
					if got := res[proto+" "+lanHost]; strings.HasPrefix(got, "answered") {
						t.Errorf("%s to the host's own address: %s", proto, got)
					}
				}
			})
		}
		if len(neighbour.get()) < 2*len(runtimes) {
			t.Errorf("the neighbour saw %v", neighbour.get())
		}
		if s := host.get(); len(s) > 0 {
			t.Errorf("the host's LAN listener saw %v", s)
		}
	})
}

// waitEvents waits until sandbox id's events hold each of want.
func (d *daemon) waitEvents(t *testing.T, id string, want []string) {
	t.Helper()
	var msgs []string
	if poll(15*time.Second, func() bool {
		evs, err := d.client.Events(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		msgs = msgs[:0]
		for _, e := range evs {
			msgs = append(msgs, e.Kind+": "+e.Message)
		}
		all := strings.Join(msgs, "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				return false
			}
		}
		return true
	}) {
		return
	}
	t.Errorf("the events of %s lack some of %q:\n%s", id, want, strings.Join(msgs, "\n"))
}

// assertDaemonOOMBelow checks that the daemon's oom_score_adj is below
// that of every process of sandbox id (its cgroup's), and is the
// documented -500 where the daemon may lower it (CAP_SYS_RESOURCE).
func assertDaemonOOMBelow(t *testing.T, d *daemon, rt, id string) {
	t.Helper()
	daemonAdj := oomScoreAdj(t, d.cmd.Process.Pid)
	if hasCapSysResource(t) && daemonAdj != -500 {
		t.Errorf("the daemon's oom_score_adj is %d, want -500", daemonAdj)
	}
	parent := map[string]string{"gvisor": "/corral/", "vm": "/corral-vm/"}[rt]
	pids, err := cgroups.Procs(parent + id)
	if err != nil || len(pids) == 0 {
		t.Fatalf("processes of %s: %v %v", id, pids, err)
	}
	var scores []string
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
		if err != nil {
			continue // ended meanwhile
		}
		adj, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		scores = append(scores, strconv.Itoa(pid)+"="+strconv.Itoa(adj))
		if adj <= daemonAdj {
			t.Errorf("process %d of %s has oom_score_adj %d, not above the daemon's %d", pid, id, adj, daemonAdj)
		}
	}
	t.Logf("%s: daemon oom_score_adj %d; the sandbox's processes %v", rt, daemonAdj, scores)
}

func oomScoreAdj(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	adj, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return adj
}

// hasCapSysResource reports whether this process (root, as the daemon)
// holds CAP_SYS_RESOURCE, which lowering an oom_score_adj needs.
func hasCapSysResource(t *testing.T) bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<24) != 0
		}
	}
	return false
}
