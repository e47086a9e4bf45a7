package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// What the e2e package owns on the host, and nothing else: every daemon it
// starts takes a network slot (its own nftables table, host link prefix,
// address pool, NFLOG group, and ports: resolver, proxy, and the API,
// envd, ports and metrics listeners on loopback) and keeps its state under
// stateRoot. None of it is what an
// installed daemon uses (table corral, links crl*, 10.88.0.0/16, group
// 7717, ports 7070, 7071, 49983, 15053, 15001, /var/lib/corral), so the
// suite runs beside `scripts/setup.sh`'s daemon.
//
// One e2e process runs on a host at a time (hostLock, taken in TestMain);
// it first sweeps whatever a crashed run left of these names, so a
// crashed test cannot break a later one.
const (
	// lockPath serialises e2e runs on one host.
	lockPath = "/run/corral-e2e.lock"
	// stateRoot holds every test daemon's state directory.
	stateRoot = "/tmp/ce2e"
	// maxSlots bounds the daemons alive at once.
	maxSlots = 48
	// slotTablePrefix, slotLinkPrefix: a slot's nftables table and host
	// links are these and its number in two digits.
	slotTablePrefix = "corral-e2e-"
	slotLinkPrefix  = "ce"
	// slotGroupBase, slotPortBase: a slot's NFLOG group and its
	// slotPorts ports from slotPortBase+slotPorts*n (below the kernel's
	// ephemeral range, so nothing picks them by chance: a daemon restarted
	// on its listeners' ports finds them free, which a port 0 first
	// bound, and then an outgoing connection's, was not always).
	slotGroupBase = 7800
	slotPortBase  = 20000
	slotPorts     = 8
	// legacyTable, legacyLinkPrefix: what the harness used before slots
	// (one table and prefix for every daemon), swept as well.
	legacyTable      = "corral-e2e"
	legacyLinkPrefix = "cre"
)

// hostLockFile holds the host's e2e lock for the life of the process. It
// must stay reachable: an unreachable *os.File is closed by its finalizer
// at some garbage collection, and the lock went with it (a second run then
// swept the first's daemons away).
var hostLockFile *os.File

// hostLock takes the host's e2e lock, waiting (and saying so) while
// another run holds it; the lock goes with the process.
func hostLock() error {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	hostLockFile = f
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return nil
	}
	fmt.Fprintf(os.Stderr, "e2e: another e2e run holds %s; waiting for it\n", lockPath)
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
}

// slot is one daemon's share of the host's network names.
type slot struct{ n int }

var slots = struct {
	sync.Mutex
	used [maxSlots]bool
	free *sync.Cond
}{}

// takeSlot gives t a free slot, waiting while every one is in use; it is
// released when t ends, after the daemon that holds it is torn down
// (cleanups run last first, and the daemon registers its own later).
func takeSlot(t testing.TB) *slot {
	t.Helper()
	slots.Lock()
	defer slots.Unlock()
	if slots.free == nil {
		slots.free = sync.NewCond(&slots.Mutex)
	}
	for {
		for n := range slots.used {
			if !slots.used[n] {
				slots.used[n] = true
				s := &slot{n: n}
				t.Cleanup(s.release)
				return s
			}
		}
		slots.free.Wait()
	}
}

func (s *slot) release() {
	s.sweepNet()
	slots.Lock()
	slots.used[s.n] = false
	slots.free.Broadcast()
	slots.Unlock()
}

func (s *slot) table() string      { return fmt.Sprintf("%s%02d", slotTablePrefix, s.n) }
func (s *slot) linkPrefix() string { return fmt.Sprintf("%s%02d", slotLinkPrefix, s.n) }

// pool is the slot's /20 of 10.200.0.0/14 (1,024 sandboxes).
func (s *slot) pool() string {
	return fmt.Sprintf("10.%d.%d.0/20", 200+s.n/16, (s.n%16)*16)
}

// A slot's ports, by their offset from its first.
const (
	portDNS = iota
	portProxy
	portAPI
	portEnvd
	portPorts
	portMetrics
)

// port is the slot's port at offset i.
func (s *slot) port(i int) int { return slotPortBase + slotPorts*s.n + i }

// loopback is 127.0.0.1 and the slot's port at offset i.
func (s *slot) loopback(i int) string { return "127.0.0.1:" + strconv.Itoa(s.port(i)) }

// flags are the serve flags of the slot's network and its envd and ports
// listeners.
func (s *slot) flags() []string {
	return []string{"--net-table", s.table(), "--net-link-prefix", s.linkPrefix(), "--net-pool", s.pool(),
		"--net-log-group", strconv.Itoa(slotGroupBase + s.n),
		"--dns-port", strconv.Itoa(s.port(portDNS)), "--proxy-port", strconv.Itoa(s.port(portProxy)),
		"--envd-listen", s.loopback(portEnvd), "--ports-listen", s.loopback(portPorts)}
}

// sweepNet removes the slot's table and links, which a daemon that
// stopped keeps for its sandboxes' next start.
func (s *slot) sweepNet() {
	_ = exec.Command("nft", "delete", "table", "inet", s.table()).Run()
	for _, l := range hostLinks(s.linkPrefix()) {
		_ = exec.Command("ip", "link", "del", l).Run()
	}
}

// newStateDir is a fresh state directory under stateRoot, removed when t
// ends (after the daemon using it, whose cleanup is registered later).
func newStateDir(t testing.TB) string {
	t.Helper()
	state, err := os.MkdirTemp(stateRoot, "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sweepDir(state) })
	return state
}

// sweep removes what an earlier e2e run on this host may have left:
// processes that name stateRoot (daemons, runsc, QEMU), mounts under it,
// every slot's table and links, the world's namespaces and links, and
// stateRoot itself. Run with the host lock held, before any test.
func sweep() {
	sweepDir(stateRoot)
	out, _ := exec.Command("nft", "list", "tables").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[1] == "inet" && (strings.HasPrefix(f[2], slotTablePrefix) || f[2] == legacyTable) {
			_ = exec.Command("nft", "delete", "table", "inet", f[2]).Run()
		}
	}
	for _, prefix := range append([]string{slotLinkPrefix, legacyLinkPrefix}, worldLinkPrefixes...) {
		for _, l := range hostLinks(prefix) {
			_ = exec.Command("ip", "link", "del", l).Run()
		}
	}
	nss, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(nss), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && hasAnyPrefix(f[0], worldLinkPrefixes) {
			_ = exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
	if err := os.MkdirAll(stateRoot, 0o755); err == nil {
		_ = os.Chmod(stateRoot, 0o755) // as /tmp: a test reads the state dir as nobody
	}
}

// sweepDir kills the processes that name dir, detaches the mounts under
// it (deepest first) and removes it.
func sweepDir(dir string) {
	killNaming(dir)
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		var mounts []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fs := strings.Fields(sc.Text()); len(fs) > 4 && (fs[4] == dir || strings.HasPrefix(fs[4], dir+"/")) {
				mounts = append(mounts, fs[4])
			}
		}
		f.Close()
		for i := len(mounts) - 1; i >= 0; i-- {
			_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
		}
	}
	_ = os.RemoveAll(dir)
}

// killNaming kills (SIGKILL) every process whose command line names dir,
// and waits a moment for them to go.
func killNaming(dir string) {
	for range 20 {
		killed := 0
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			if err != nil || pid == os.Getpid() || !strings.Contains(string(b), dir) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		if killed == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hostLinks lists the host's links whose names start with prefix.
func hostLinks(prefix string) []string {
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	var links []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, prefix) {
			links = append(links, name)
		}
	}
	return links
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
