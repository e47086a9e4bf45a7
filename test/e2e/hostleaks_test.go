package e2e

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// assertHostClean fails if anything of a daemon's sandboxes is left on the
// host once every one of them (ids) is removed: on top of what
// assertNoLeaks (their processes, mounts, cgroups and directories) and
// assertNoNetworkLeft (links, namespaces, slots) look for, any process
// but the daemon naming the state directory (a runsc left behind), any
// mount under it but runsc's own null network namespace, any sandbox or
// snapshot directory, image lease, per-sandbox nftables object, or
// address from the sandboxes' pool.
func (d *daemon) assertHostClean(t *testing.T, ids []string) {
	t.Helper()
	d.assertNoLeaks(t, ids)
	d.assertNoNetworkLeft(t)
	var left []string
	if poll(5*time.Second, func() bool { left = d.hostLeftovers(); return len(left) == 0 }) { // processes being reaped get a moment
		return
	}
	t.Errorf("left on the host once everything was removed:\n%s", strings.Join(left, "\n"))
}

// perSandboxNft matches the nftables objects of one sandbox (chains, sets,
// counters and limits named sb<index>_…) and, in the maps, a host link of
// the daemon's prefix.
func perSandboxNft(linkPrefix string) *regexp.Regexp {
	return regexp.MustCompile(`\b(chain|set|map|counter|limit) sb[0-9a-f]+_|"` + regexp.QuoteMeta(linkPrefix) + `[0-9a-f]+"`)
}

func (d *daemon) hostLeftovers() []string {
	var out []string
	self := 0
	if d.running() {
		self = d.cmd.Process.Pid
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && pid != self && strings.Contains(string(b), d.state) {
			out = append(out, "process "+p+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, d.state) && !strings.Contains(line, filepath.Join(d.state, "runsc", "null-netns")) {
			out = append(out, "mount: "+line)
		}
	}
	for _, dir := range []string{"sandboxes", "snapshots", "images/leases", "vm/sandboxes", "vm/uids"} {
		ents, _ := os.ReadDir(filepath.Join(d.state, dir))
		for _, e := range ents {
			out = append(out, "file: "+filepath.Join(d.state, dir, e.Name()))
		}
	}
	if b, err := exec.Command("nft", "list", "table", "inet", d.flag("--net-table")).Output(); err == nil {
		re := perSandboxNft(d.flag("--net-link-prefix"))
		for _, line := range strings.Split(string(b), "\n") {
			if re.MatchString(line) {
				out = append(out, "nftables: "+strings.TrimSpace(line))
			}
		}
	}
	pool := d.flag("--net-pool")
	for _, line := range poolAddrs(pool) {
		out = append(out, "address: "+line)
	}
	return out
}

// poolAddrs lists the host's addresses (lines of `ip -o addr show`) in
// the pool.
func poolAddrs(pool string) []string {
	p, err := netip.ParsePrefix(pool)
	if err != nil {
		return []string{"bad pool " + pool}
	}
	b, _ := exec.Command("ip", "-o", "addr", "show").Output()
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != "inet" {
			continue
		}
		if a, err := netip.ParsePrefix(f[3]); err == nil && p.Contains(a.Addr()) {
			out = append(out, line)
		}
	}
	return out
}
