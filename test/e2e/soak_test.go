package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// The soak's size: cycles in all, and the warm-up after which the
// daemon's resources are first read.
const (
	soakCycles = 1000
	soakWarmup = 100
)

// How much the daemon may grow from the warm-up's reading to the end
// (both taken after a GC that returned freed memory to the OS, with the
// warm pool full and idle). A leak of a goroutine, a descriptor or 7 KiB
// per cycle would exceed these over the 900 cycles between the readings.
// The slack is for what legitimately differs between two idle moments:
// the client's idle keep-alive connections (goroutines, descriptors), and
// for memory what lies outside the Go heap and fills as the records grow
// (SQLite's page cache, one connection at the default cache_size: up to
// 2,000 KiB, and its allocator) plus the runtime's variance. Measured
// here: VmRSS rose 1.7-1.9 MiB from cycle 100 to 1,000 while the Go heap
// stayed at 1.9 MiB; a 3,000-cycle run rose 3.9 MiB in all and levelled
// off (0.1 MiB over its last 500 cycles), its heap flat too.
const (
	soakGoroutineSlack = 10
	soakFDSlack        = 10
	soakRSSSlackBytes  = 6 << 20
	soakRSSSlackRatio  = 0.10
)

// The soak: 1,000 create/exec/rm cycles against one daemon (the
// default spec, from its warm pool) leave nothing of any sandbox on the
// host, and the daemon's resident memory, goroutines and open descriptors
// stay flat from after a warm-up to the end.
func TestSoak(t *testing.T) {
	// Not parallel: a thousand cycles are a load of their own, which
	// beside the rest stretched every test's time by a third.
	d := startDaemon(t, "--warm-pool", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var ids []string
	var warm soakReading
	start, warmAt := time.Now(), time.Now()
	for i := 1; i <= soakCycles; i++ {
		ids = append(ids, d.soakCycle(ctx, t, i))
		if i == soakWarmup {
			warm, warmAt = d.soakRead(ctx, t, i), time.Now()
			t.Logf("after the warm-up: %s", warm)
		} else if i%200 == 0 {
			t.Logf("%s", d.soakRead(ctx, t, i))
		}
	}
	took := time.Since(start)
	end := d.soakRead(ctx, t, soakCycles)
	t.Logf("%d cycles in %s (%s per cycle after the warm-up); warm-up %s, end %s", soakCycles, took.Round(time.Second),
		(time.Since(warmAt) / (soakCycles - soakWarmup)).Round(time.Millisecond), warm, end)
	if end.goroutines > warm.goroutines+soakGoroutineSlack {
		t.Errorf("goroutines grew from %d to %d", warm.goroutines, end.goroutines)
	}
	if end.fds > warm.fds+soakFDSlack {
		t.Errorf("open descriptors grew from %d to %d", warm.fds, end.fds)
	}
	if limit := warm.rss + max(soakRSSSlackBytes, int64(float64(warm.rss)*soakRSSSlackRatio)); end.rss > limit {
		t.Errorf("resident memory grew from %d KiB to %d KiB (at most %d KiB allowed)", warm.rss>>10, end.rss>>10, limit>>10)
	}
	if left := d.sandboxLeftovers(ids); len(left) > 0 {
		t.Errorf("left of the soak's sandboxes:\n%s", strings.Join(left, "\n"))
	}
	// Everything else (the warm pool's sandboxes too) once the daemon
	// stops: a stopping daemon ends its pool.
	d.stop()
	d.assertNoNetworkLeft(t)
	if left := d.hostLeftovers(); len(left) > 0 {
		t.Errorf("left on the host once the daemon stopped:\n%s", strings.Join(left, "\n"))
	}
}

// soakCycle creates a sandbox, runs a command in it, removes it, and
// returns its id.
func (d *daemon) soakCycle(ctx context.Context, t *testing.T, i int) string {
	t.Helper()
	sb, err := d.client.Create(ctx, apiv1.CreateSandboxRequest{})
	if err != nil {
		t.Fatalf("cycle %d: create: %v", i, err)
	}
	var out, errb bytes.Buffer
	res, err := d.client.Run(ctx, sb.ID, apiv1.ExecRequest{Cmd: []string{"echo", "cycle", strconv.Itoa(i)}}, nil, &out, &errb)
	if err != nil || res.ExitCode != 0 || out.String() != fmt.Sprintf("cycle %d\n", i) {
		t.Fatalf("cycle %d: exec in %s: %v %+v %q %q", i, sb.ID, err, res, out.String(), errb.String())
	}
	if sb, err := d.client.Terminate(ctx, sb.ID); err != nil || sb.State != "terminated" {
		t.Fatalf("cycle %d: rm: %v", i, err)
	}
	return sb.ID
}

// soakReading is the daemon's resources at one moment.
type soakReading struct {
	cycle, goroutines, fds, threads int
	rss, db                         int64 // bytes
	heap                            uint64
}

func (r soakReading) String() string {
	return fmt.Sprintf("cycle %d: VmRSS %d KiB, heap %d KiB, %d goroutines, %d fds, %d threads, records %d KiB",
		r.cycle, r.rss>>10, r.heap>>10, r.goroutines, r.fds, r.threads, r.db>>10)
}

// soakRead reads the daemon's resources once its warm pool is full again
// (no refill in flight), right after a GC: VmRSS from /proc/<pid>/status,
// its descriptors from /proc/<pid>/fd, goroutines and heap from the
// daemon.
func (d *daemon) soakRead(ctx context.Context, t *testing.T, cycle int) soakReading {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		v, err := d.client.Version(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v.WarmPool != nil && v.WarmPool.Ready == v.WarmPool.Size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool did not refill: %+v", v.WarmPool)
		}
	}
	rt, err := d.client.DebugRuntime(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(d.cmd.Process.Pid)
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB$`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no VmRSS in /proc/%s/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	fds, err := os.ReadDir(filepath.Join("/proc", pid, "fd"))
	if err != nil {
		t.Fatal(err)
	}
	var db int64 // the records with their write-ahead log: the page cache's bound below 2,000 KiB
	for _, f := range []string{"corral.db", "corral.db-wal"} {
		if fi, err := os.Stat(filepath.Join(d.state, f)); err == nil {
			db += fi.Size()
		}
	}
	return soakReading{cycle: cycle, goroutines: rt.Goroutines, fds: len(fds), threads: rt.Threads, rss: kb << 10, heap: rt.HeapAllocBytes, db: db}
}

// sandboxLeftovers is leftovers for many sandboxes at once: one pass over
// the host's processes, mounts and cgroups, matching any of ids.
func (d *daemon) sandboxLeftovers(ids []string) []string {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	idRE := regexp.MustCompile(`sb-[a-z2-7]{16}`)
	var out []string
	named := func(what, s string) {
		for _, id := range idRE.FindAllString(s, -1) {
			if want[id] {
				out = append(out, what+": "+s)
				return
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil {
			named("process "+p, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		named("mount", line)
	}
	for _, parent := range []string{"corral", "corral-vm"} {
		cgs, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent + "/sb-*")
		v2, _ := filepath.Glob("/sys/fs/cgroup/" + parent + "/sb-*")
		for _, cg := range append(cgs, v2...) {
			named("cgroup", cg)
		}
	}
	for _, dir := range []string{"sandboxes", "vm/sandboxes", "net/netns", "net/slots", "images/leases"} {
		ents, _ := os.ReadDir(filepath.Join(d.state, dir))
		for _, e := range ents {
			named("file", filepath.Join(d.state, dir, e.Name()))
		}
	}
	return out
}
