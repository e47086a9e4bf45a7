package e2e

import (
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
	for i := 0; i < 50; i++ { // processes being reaped get a moment
		if left = d.hostLeftovers(); len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("left on the host once everything was removed:\n%s", strings.Join(left, "\n"))
}

// perSandboxNft matches the nftables objects of one sandbox (chains, sets,
// counters and limits named sb<index>_…) and its host link in the maps.
var perSandboxNft = regexp.MustCompile(`\b(chain|set|map|counter|limit) sb[0-9a-f]+_|"cre[0-9a-f]+"`)

func (d *daemon) hostLeftovers() []string {
	var out []string
	self := 0
	if d.cmd != nil && d.cmd.ProcessState == nil {
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
		for _, line := range strings.Split(string(b), "\n") {
			if perSandboxNft.MatchString(line) {
				out = append(out, "nftables: "+strings.TrimSpace(line))
			}
		}
	}
	pool := d.flag("--net-pool")
	prefix := pool[:strings.LastIndex(pool, ".0.0/")] + "."
	if b, err := exec.Command("ip", "-o", "addr", "show").Output(); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, " "+prefix) {
				out = append(out, "address: "+line)
			}
		}
	}
	return out
}
