package selftest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/selftest/probe"
)

// connectFrom runs the connect probe in sb.
func (s *session) connectFrom(ctx context.Context, sb *sbx, payload string, targets ...probe.Target) ([]probe.Attempt, error) {
	var out []probe.Attempt
	err := s.probe(ctx, sb, "connect", probe.ConnectArgs{Targets: targets, TimeoutMS: 2000, Payload: payload}, &out)
	return out, err
}

func tcp(host string, port int) probe.Target {
	return probe.Target{Addr: fmt.Sprintf("%s:%d", host, port), Proto: "tcp"}
}

func udp(host string, port int) probe.Target {
	return probe.Target{Addr: fmt.Sprintf("%s:%d", host, port), Proto: "udp"}
}

// settle gives datagrams and connections time to reach the listeners.
func settle() { time.Sleep(time.Second) }

func reachControl(ctx context.Context, s *session) Result {
	tried := "reach the selftest's fake internet (TCP and UDP), and the neighbour's listener from inside it"
	at, err := s.connectFrom(ctx, s.a, "ctl-"+s.nonce, tcp(internetAddr, worldTCPPort), udp(internetAddr, worldUDPPort))
	if err == nil {
		_, err = s.connectFrom(ctx, s.b, "self-"+s.nonce, tcp("127.0.0.1", neighbourPort))
	}
	if err != nil {
		return inconclusive(tried, err)
	}
	settle()
	var bad []string
	if !at[0].OK || at[0].Reply != "world-"+s.w.tag {
		bad = append(bad, fmt.Sprintf("TCP to the fake internet: ok=%v reply=%q err=%s", at[0].OK, at[0].Reply, at[0].Err))
	}
	if len(s.w.seen.matching("ctl-"+s.nonce)) < 2 {
		bad = append(bad, "the fake internet did not see both the TCP connection and the UDP datagram")
	}
	if len(s.bSeen.matching("self-"+s.nonce)) == 0 {
		bad = append(bad, "the neighbour's listener did not see its own connection")
	}
	if len(bad) > 0 {
		return Result{Tried: tried, Status: Inconclusive, Evidence: "control failed, so the network cases cannot be trusted: " + strings.Join(bad, "; ")}
	}
	return verdict(true, tried, "control: the fake internet answered TCP and saw UDP from %s; the neighbour's listener works", s.a.addr())
}

func reachHostAddresses(ctx context.Context, s *session) Result {
	addrs := append(hostAddrs(), s.a.info.Gateway)
	tried := fmt.Sprintf("TCP to the daemon's API port %d and to a host listener on port %d, at every host address and the gateway (%s)",
		s.cfg.APIPort, s.hostPort, strings.Join(addrs, ", "))
	var targets []probe.Target
	for _, a := range addrs {
		if a == "" {
			continue
		}
		targets = append(targets, tcp(a, s.cfg.APIPort), tcp(a, s.hostPort))
	}
	at, err := s.connectFrom(ctx, s.a, "host-"+s.nonce, targets...)
	if err != nil {
		return inconclusive(tried, err)
	}
	settle()
	var reached []string
	for _, a := range at {
		if a.OK {
			reached = append(reached, a.Target.Addr)
		}
	}
	s.hostSeen.mu.Lock()
	seen := len(s.hostSeen.seen)
	s.hostSeen.mu.Unlock()
	return verdict(len(reached) == 0 && seen == 0, tried,
		"%d of %d connections opened (%s); the host listener saw %d", len(reached), len(at), joinMax(reached, 4), seen)
}

// reachInternal tries an address the default policy denies, placed in the
// world (the metadata address or a private one).
func reachInternal(ctx context.Context, s *session, target string) Result {
	tried := fmt.Sprintf("TCP :%d and UDP :%d to %s, where the selftest's fake answers", worldTCPPort, worldUDPPort, target)
	payload := "int-" + s.nonce + "-" + target
	at, err := s.connectFrom(ctx, s.a, payload, tcp(target, worldTCPPort), udp(target, worldUDPPort))
	if err != nil {
		return inconclusive(tried, err)
	}
	settle()
	seen := s.w.seen.matching(payload)
	t := at[0]
	if t.OK && t.Reply != "world-"+s.w.tag {
		return verdict(false, tried, "a TCP connection opened and something other than the selftest's fake answered %q: the daemon or its proxy reached past the host", t.Reply)
	}
	return verdict(!t.OK && len(seen) == 0, tried, "TCP: %s; the fake at %s saw %d packets or connections from the sandbox", outcome(t), target, len(seen))
}

func outcome(a probe.Attempt) string {
	if a.OK {
		return "connected"
	}
	return "refused or timed out (" + a.Err + ")"
}

func reachOtherSandbox(ctx context.Context, s *session) Result {
	tried := fmt.Sprintf("TCP and UDP to the neighbour sandbox %s (%s:%d), which listens", s.b.id, s.b.addr(), neighbourPort)
	if len(s.bSeen.matching("self-"+s.nonce)) == 0 {
		return Result{Tried: tried, Status: Inconclusive, Evidence: "the neighbour's listener never saw its own control connection"}
	}
	payload := "nb-" + s.nonce
	at, err := s.connectFrom(ctx, s.a, payload, tcp(s.b.addr(), neighbourPort), udp(s.b.addr(), neighbourPort))
	if err != nil {
		return inconclusive(tried, err)
	}
	settle()
	seen := s.bSeen.matching(payload)
	return verdict(!at[0].OK && len(seen) == 0, tried, "TCP: %s; the neighbour saw %d connections or datagrams", outcome(at[0]), len(seen))
}

func reachHostProcesses(ctx context.Context, s *session) Result {
	marker := "corral-selftest-host-" + s.nonce
	tried := "list every process visible inside and look for the host's marker process " + marker
	var r probe.ProcsResult
	if err := s.probe(ctx, s.a, "procs", probe.ProcsArgs{Marker: marker}, &r); err != nil {
		return inconclusive(tried, err)
	}
	host := hostProcesses(marker)
	if len(host) == 0 {
		return Result{Tried: tried, Status: Inconclusive, Evidence: "the host's marker process is not running"}
	}
	return verdict(len(r.Found) == 0, tried, "the sandbox sees %d processes, %d of them the host's marker (on the host: %s)", r.Visible, len(r.Found), host[0])
}

func reachHostFiles(ctx context.Context, s *session) Result {
	name := "corral-selftest-" + s.nonce + "-host"
	tried := "walk the whole filesystem inside for the marker files the host wrote in /tmp and /root"
	var r probe.FindResult
	if err := s.probeFor(ctx, s.a, "findfile", probe.FindArgs{Roots: []string{"/"}, Name: name, MaxEntries: 400000}, &r, 5*time.Minute); err != nil {
		return inconclusive(tried, err)
	}
	return verdict(len(r.Found) == 0, tried, "scanned %d entries; found %d (%s)", r.Scanned, len(r.Found), joinMax(r.Found, 3))
}

func reachHostKernel(ctx context.Context, s *session) Result {
	tried := "read the kernel's boot_id and release inside and compare them with the host's"
	host := readTrim("/proc/sys/kernel/random/boot_id")
	var u unix.Utsname
	_ = unix.Uname(&u)
	rel := unix.ByteSliceToString(u.Release[:])
	if host == "" || s.a.info.BootID == "" {
		return Result{Tried: tried, Status: Inconclusive, Evidence: fmt.Sprintf("boot_id host %q, sandbox %q", host, s.a.info.BootID)}
	}
	return verdict(host != s.a.info.BootID, tried, "the sandbox's kernel is its own: boot_id %s (host %s), release %s (host %s)",
		s.a.info.BootID, host, s.a.info.Release, rel)
}

// hostRootDevice is the block device of the host's root filesystem and the
// hash of its first 4 KiB.
func hostRootDevice() (probe.Node, string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/", &st); err != nil {
		return probe.Node{}, "", err
	}
	maj, minr := unix.Major(st.Dev), unix.Minor(st.Dev)
	n := probe.Node{Name: "host-root", Block: true, Major: maj, Minor: minr}
	f, err := os.Open(devNode(maj, minr))
	if err != nil {
		return n, "", err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	m, err := io.ReadFull(f, buf)
	if m == 0 {
		return n, "", err
	}
	h := sha256.Sum256(buf[:m])
	return n, hex.EncodeToString(h[:]), nil
}

// devNode is the /dev path of a block device, from sysfs.
func devNode(maj, minr uint32) string {
	for _, line := range strings.Split(readTrim(fmt.Sprintf("/sys/dev/block/%d:%d/uevent", maj, minr)), "\n") {
		if name, ok := strings.CutPrefix(line, "DEVNAME="); ok {
			return "/dev/" + name
		}
	}
	return fmt.Sprintf("/dev/block/%d:%d", maj, minr)
}

func reachHostDevices(ctx context.Context, s *session) Result {
	tried := "mknod and read the host root disk's device number, /dev/mem, kmem, port, kmsg, kvm, vhost-net and fuse"
	root, sum, herr := hostRootDevice()
	if root.Major == 0 && root.Minor == 0 {
		return inconclusive(tried, fmt.Errorf("finding the host's root device: %w", herr))
	}
	nodes := []probe.Node{root, {Name: "mem", Major: 1, Minor: 1}, {Name: "kmem", Major: 1, Minor: 2}, {Name: "port", Major: 1, Minor: 4},
		{Name: "kmsg", Major: 1, Minor: 11}, {Name: "kvm", Major: 10, Minor: 232}, {Name: "vhost-net", Major: 10, Minor: 238}, {Name: "fuse", Major: 10, Minor: 229}}
	var out []probe.NodeResult
	if err := s.probe(ctx, s.a, "devices", probe.DevicesArgs{Nodes: nodes, Read: 4096}, &out); err != nil {
		return inconclusive(tried, err)
	}
	var ev []string
	readRoot := ""
	for _, r := range out {
		switch {
		case r.MknodErr != "":
			ev = append(ev, r.Node.Name+": mknod "+r.MknodErr)
		case r.OpenErr != "":
			ev = append(ev, r.Node.Name+": open "+r.OpenErr)
		case r.ReadErr != "":
			ev = append(ev, r.Node.Name+": read "+r.ReadErr)
		default:
			ev = append(ev, r.Node.Name+": read "+r.SHA256[:12])
		}
		if r.Node.Name == "host-root" && r.SHA256 != "" {
			readRoot = r.SHA256
		}
	}
	inside := strings.Join(ev, ", ")
	if own, ok := s.ownDisks(s.a)[readRoot]; ok && readRoot != sum {
		return verdict(true, tried, "what the sandbox read at %d:%d is its own disk (%s), not the host's; inside: %s", root.Major, root.Minor, own, inside)
	}
	if sum == "" {
		// The host itself may not read its disk here (a device cgroup):
		// then only a sandbox that could not read it either is judged.
		if readRoot != "" {
			return Result{Tried: tried, Status: Inconclusive, Evidence: fmt.Sprintf("the host cannot read its own root device (%v) to compare; inside: %s", herr, inside)}
		}
		return verdict(true, tried, "host root disk %d:%d; inside: %s", root.Major, root.Minor, inside)
	}
	return verdict(readRoot != sum, tried, "host root disk %d:%d starts with %s; inside: %s", root.Major, root.Minor, sum[:12], inside)
}

// ownDisks maps the hash of the first 4 KiB of each file backing sb's own
// disks (its directory, the vm runtime's disk cache) to the file.
func (s *session) ownDisks(sb *sbx) map[string]string {
	out := map[string]string{}
	for _, dir := range []string{s.sandboxDir(sb), filepath.Join(s.cfg.StateDir, "vm", "disks")} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return nil
			}
			defer f.Close()
			buf := make([]byte, 4096)
			if n, _ := io.ReadFull(f, buf); n > 0 {
				h := sha256.Sum256(buf[:n])
				out[hex.EncodeToString(h[:])] = p
			}
			return nil
		})
	}
	return out
}

// procSysResult is the procsys probe's result.
type procSysResult struct {
	Tries         []probe.Try `json:"tries"`
	MarkerInKLog  bool        `json:"marker_in_kernel_log"`
	hostBefore    [2]string
	hostAfter     [2]string
	hostnameTried string
	err           error
}

// runProcSys runs the procsys probe once for the two cases that judge it.
func (s *session) runProcSys(ctx context.Context) *procSysResult {
	if s.procSys != nil {
		return s.procSys
	}
	r := &procSysResult{hostnameTried: "pwned-" + s.nonce}
	r.hostBefore = [2]string{readTrim("/proc/sys/kernel/core_pattern"), readTrim("/proc/sys/kernel/hostname")}
	r.err = s.probe(ctx, s.a, "procsys", probe.ProcSysArgs{Hostname: r.hostnameTried,
		CorePattern: "|/bin/false corral-selftest-" + s.nonce, Marker: "corral-selftest-kmsg-" + s.nonce}, r)
	r.hostAfter = [2]string{readTrim("/proc/sys/kernel/core_pattern"), readTrim("/proc/sys/kernel/hostname")}
	s.procSys = r
	return r
}

func reachKernelLog(ctx context.Context, s *session) Result {
	tried := "read the kernel log (syslog, /dev/kmsg) inside and look for the line the host wrote to its own"
	r := s.runProcSys(ctx)
	if r.err != nil {
		return inconclusive(tried, r.err)
	}
	var how []string
	for _, t := range r.Tries {
		if strings.Contains(t.What, "syslog") || strings.Contains(t.What, "kmsg") {
			how = append(how, t.What+": "+orOK(t.Err))
		}
	}
	return verdict(!r.MarkerInKLog, tried, "host's line seen: %v (%s)", r.MarkerInKLog, strings.Join(how, ", "))
}

func orOK(err string) string {
	if err == "" {
		return "ok"
	}
	return err
}
