package selftest

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"corral/internal/selftest/probe"
	"corral/pkg/apiv1"
)

const mib = 1 << 20

// answers times an echo in sb.
func (s *session) answers(ctx context.Context, sb *sbx) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out strings.Builder
	t0 := time.Now()
	res, err := s.c.Run(ctx, sb.id, apiv1.ExecRequest{Cmd: []string{"echo", "ok"}}, nil, &out, &strings.Builder{})
	d := time.Since(t0)
	if err == nil && (res.ExitCode != 0 || strings.TrimSpace(out.String()) != "ok") {
		err = fmt.Errorf("echo: exit %d, output %q", res.ExitCode, out.String())
	}
	return d, err
}

// medianAnswer is the median of n echo round trips in sb.
func (s *session) medianAnswer(ctx context.Context, sb *sbx, n int) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i < n; i++ {
		d, err := s.answers(ctx, sb)
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[n/2], nil
}

func (s *session) sandboxDir(sb *sbx) string {
	return filepath.Join(s.cfg.StateDir, "sandboxes", sb.id)
}

// fate says whether sb still runs after a case tried to exhaust it: a
// sandbox that took itself down has been contained as long as its
// neighbours and the host were not touched.
func (s *session) fate(ctx context.Context, sb *sbx) string {
	rec, err := s.c.Get(ctx, sb.id)
	switch {
	case err != nil:
		return "unknown (" + err.Error() + ")"
	case rec.State == "running":
		if _, err := s.answers(ctx, sb); err != nil {
			return "running, not answering (" + err.Error() + ")"
		}
		return "running and answering"
	default:
		return "ended: " + rec.State + " " + rec.EndReason
	}
}

func exhaustOutput(ctx context.Context, s *session) Result {
	tried := "write 2 GiB to stdout as fast as possible while the caller reads nothing"
	pid := daemonPID(s.cfg.StateDir)
	if pid == 0 {
		return inconclusive(tried, fmt.Errorf("no `corral serve --state-dir %s` process on this host", s.cfg.StateDir))
	}
	before := statusKiB(pid, "VmRSS")
	_, stop, err := s.background(ctx, s.a, "output", probe.OutputArgs{Bytes: 2 << 30}, nil)
	if err != nil {
		return inconclusive(tried, err)
	}
	peak := before
	for i := 0; i < 10; i++ {
		time.Sleep(time.Second)
		peak = max(peak, statusKiB(pid, "VmRSS"))
	}
	_, berr := s.answers(ctx, s.b)
	stop()
	grew := (peak - before) / 1024
	return verdict(grew < 64 && berr == nil, tried, "the daemon's RSS went from %d to at most %d MiB over 10 s (growth %d MiB, bound 64); the neighbour answered: %v",
		before/1024, peak/1024, grew, errOK(berr))
}

func errOK(err error) string {
	if err == nil {
		return "yes"
	}
	return "no (" + err.Error() + ")"
}

func exhaustInodesFDs(ctx context.Context, s *session) Result {
	tried := "open descriptors until refused (up to 300,000), then create empty files until refused (up to 300,000), in a sandbox with 256 MiB of memory and disk"
	x, err := s.create(ctx, "inodes", apiv1.CreateSandboxRequest{MemoryMB: 256, DiskMB: 256})
	if err != nil {
		return inconclusive(tried, err)
	}
	var files, fds probe.ManyResult
	ferr := s.probeFor(ctx, x, "fds", probe.ManyArgs{Max: 300000, Seconds: 15}, &fds, time.Minute)
	ierr := s.probeFor(ctx, x, "files", probe.ManyArgs{Dir: "/corral-selftest-files", Max: 300000, Seconds: 15}, &files, time.Minute)
	hostBytes := allocatedBytes(s.sandboxDir(x))
	_, berr := s.answers(ctx, s.b)
	bound := int64(256+128) * mib
	return verdict(hostBytes <= bound && berr == nil, tried,
		"%d descriptors (%s%s), %d files (%s%s); the sandbox's host directory holds %d MiB (bound %d); the sandbox is %s; the neighbour answered: %s",
		fds.Count, stopReason(fds.Err), probeNote(ferr), files.Count, stopReason(files.Err), probeNote(ierr),
		hostBytes/mib, bound/mib, s.fate(ctx, x), errOK(berr))
}

// probeNote mentions a probe that did not report (its sandbox went down
// under it).
func probeNote(err error) string {
	if err == nil {
		return ""
	}
	return "; the probe did not report: " + err.Error()
}

func stopReason(err string) string {
	if err == "" {
		return "no refusal before the probe's own bound"
	}
	return "then " + err
}

func exhaustDisk(ctx context.Context, s *session) Result {
	tried := "write up to 4 GiB into the root filesystem of a sandbox with a 256 MiB disk"
	x, err := s.create(ctx, "disk", apiv1.CreateSandboxRequest{DiskMB: 256})
	if err != nil {
		return inconclusive(tried, err)
	}
	var r probe.FillResult
	err = s.probeFor(ctx, x, "fill", probe.FillArgs{Path: "/corral-selftest-fill", MaxBytes: 4 << 30, Seconds: 150}, &r, 4*time.Minute)
	if err != nil {
		return inconclusive(tried, err)
	}
	hostBytes := allocatedBytes(s.sandboxDir(x))
	bound := int64(256+128) * mib
	ok := r.Err != "" && r.Bytes <= bound && hostBytes <= bound
	return verdict(ok, tried, "wrote %d MiB, %s; the sandbox's host directory held %d MiB (bound %d)",
		r.Bytes/mib, stopReason(r.Err), hostBytes/mib, bound/mib)
}

// hostBacked lists, per runtime, the paths inside whose bytes land in host
// files: the agent's channel and PID 1's output (gVisor), the consoles
// (vm).
func hostBacked(rt string) []string {
	if rt == "vm" {
		return []string{"/dev/console", "/dev/ttyS0", "/dev/hvc0"}
	}
	return []string{"/proc/1/fd/1", "/proc/1/fd/2"}
}

// logBound is the most a sandbox's host-side log or channel may hold.
const logBound = 17 * mib

func exhaustHostBacked(ctx context.Context, s *session) Result {
	paths := hostBacked(s.rt)
	tried := "write 24 MiB each to " + strings.Join(paths, ", ")
	if s.rt == "gvisor" {
		tried += "; fill the agent's channel directory /.corral/run (1 GiB, 100,000 files) and plant device nodes and a setuid binary in it"
	}
	var ev []string
	for _, p := range paths {
		var r probe.FillResult
		if err := s.probeFor(ctx, s.a, "fill", probe.FillArgs{Path: p, MaxBytes: 24 * mib, Seconds: 15, Append: true}, &r, 3*time.Minute); err != nil {
			ev = append(ev, p+": "+err.Error())
			continue
		}
		ev = append(ev, fmt.Sprintf("%s: %d MiB %s", p, r.Bytes/mib, stopReason(r.Err)))
	}
	if s.rt == "gvisor" {
		ev = append(ev, s.fillChannel(ctx)...)
	}
	dir := s.sandboxDir(s.a)
	var over []string
	for _, p := range hostLogs(dir, s.cfg.StateDir, s.a.id) {
		if n := allocatedBytes(p); n > logBound {
			over = append(over, fmt.Sprintf("%s holds %d MiB", p, n/mib))
		}
	}
	planted := setuidOrDevices(dir)
	_, aerr := s.answers(ctx, s.a)
	ok := len(over) == 0 && len(planted) == 0
	return verdict(ok, tried, "host files over %d MiB: %d (%s); setuid or device files on the host: %d (%s); inside: %s; the sandbox answers: %s",
		logBound/mib, len(over), joinMax(over, 3), len(planted), joinMax(planted, 3), strings.Join(ev, "; "), errOK(aerr))
}

// fillChannel fills the gVisor agent's channel directory and plants files
// in it.
func (s *session) fillChannel(ctx context.Context) []string {
	var ev []string
	var r probe.FillResult
	if err := s.probeFor(ctx, s.a, "fill", probe.FillArgs{Path: "/.corral/run/fill", MaxBytes: 1 << 30, Seconds: 60}, &r, 3*time.Minute); err == nil {
		ev = append(ev, fmt.Sprintf("/.corral/run: %d MiB %s", r.Bytes/mib, stopReason(r.Err)))
	}
	var m probe.ManyResult
	if err := s.probeFor(ctx, s.a, "files", probe.ManyArgs{Dir: "/.corral/run/many", Max: 100000, Seconds: 20}, &m, 3*time.Minute); err == nil {
		ev = append(ev, fmt.Sprintf("/.corral/run files: %d %s", m.Count, stopReason(m.Err)))
	}
	var p struct{ Tries []probe.Try }
	if err := s.probe(ctx, s.a, "plant", probe.PlantArgs{Dir: "/.corral/run"}, &p); err == nil {
		for _, t := range p.Tries {
			ev = append(ev, t.What+": "+orOK(t.Err))
		}
	}
	for _, q := range []string{"/.corral/run/fill", "/.corral/run/many", "/.corral/run/suid", "/.corral/run/blk", "/.corral/run/blk-virtio", "/.corral/run/mem"} {
		_ = s.c.Remove(ctx, s.a.id, q, true)
	}
	return ev
}

// hostLogs lists the host files and directories that take a sandbox's
// output or channel: the logs in its directory (console, runsc), its
// channel directory, and its entrypoint logs.
func hostLogs(dir, state, id string) []string {
	out, _ := filepath.Glob(filepath.Join(dir, "*.log*"))
	if exists(filepath.Join(dir, "chan")) {
		out = append(out, filepath.Join(dir, "chan"))
	}
	logs, _ := filepath.Glob(filepath.Join(state, "logs", id+"*"))
	return append(out, logs...)
}

func exhaustFork(ctx context.Context, s *session) Result {
	tried := "fork children until refused (up to 20,000), while the neighbour is asked to run a command"
	x, err := s.create(ctx, "fork", apiv1.CreateSandboxRequest{})
	if err != nil {
		return inconclusive(tried, err)
	}
	var r probe.ForkResult
	wait, _, err := s.background(ctx, x, "fork", probe.ForkArgs{Max: 20000, HoldMS: 5000, Seconds: 40}, &r)
	if err != nil {
		return inconclusive(tried, err)
	}
	time.Sleep(4 * time.Second)
	d, berr := s.answers(ctx, s.b)
	werr := wait()
	stopped := r.StopErr != "" || werr != nil // a limit refused it, or the sandbox went down under it
	return verdict(stopped && berr == nil, tried, "%d children, %s%s; the neighbour answered in %d ms: %s; the sandbox is %s",
		r.Children, stopReason(r.StopErr), probeNote(werr), d.Milliseconds(), errOK(berr), s.fate(ctx, x))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func exhaustConnections(ctx context.Context, s *session) Result {
	tried := "open and hold as many TCP connections to the fake internet as possible (up to 6,000), then have the neighbour open 20"
	var r probe.ConnsResult
	wait, _, err := s.background(ctx, s.a, "conns", probe.ConnsArgs{Addr: fmt.Sprintf("%s:%d", internetAddr, worldHoldPort),
		Max: 6000, Parallel: 64, HoldMS: 20000}, &r)
	if err != nil {
		return inconclusive(tried, err)
	}
	time.Sleep(12 * time.Second)
	var targets []probe.Target
	for i := 0; i < 20; i++ {
		targets = append(targets, tcp(internetAddr, worldTCPPort))
	}
	at, berr := s.connectFrom(ctx, s.b, "conn-"+s.nonce, targets...)
	werr := wait()
	if berr != nil || werr != nil {
		return inconclusive(tried, fmt.Errorf("neighbour: %v; attacker: %v", berr, werr))
	}
	ok := 0
	for _, a := range at {
		if a.OK {
			ok++
		}
	}
	return verdict(ok == len(at), tried, "the attacker held %d connections (%d refused, first: %s); the neighbour opened %d of %d",
		r.Opened, r.Failed, r.FirstErr, ok, len(at))
}

func exhaustSnapshots(ctx context.Context, s *session) Result {
	const most = 12
	tried := fmt.Sprintf("take memory snapshots of one sandbox until refused (up to %d)", most)
	var taken []string
	defer func() {
		for _, id := range taken {
			_, _ = s.c.RemoveSnapshot(context.WithoutCancel(ctx), id)
		}
	}()
	for i := 0; i < most; i++ {
		snap, err := s.c.SnapshotMemory(ctx, s.a.id, "")
		if err != nil {
			code := errCode(err)
			if code == "resource_exhausted" || code == "failed_precondition" {
				return verdict(true, tried, "refused after %d: %s (%s)", len(taken), err, code)
			}
			return inconclusive(tried, fmt.Errorf("after %d snapshots: %w", len(taken), err))
		}
		taken = append(taken, snap.ID)
	}
	return verdict(false, tried, "all %d snapshots were taken: no quota stopped them", most)
}

func exhaustMemory(ctx context.Context, s *session) Result {
	tried := "touch 2 GiB of memory in a sandbox limited to 128 MiB"
	c, err := s.create(ctx, "memory", apiv1.CreateSandboxRequest{MemoryMB: 128})
	if err != nil {
		return inconclusive(tried, err)
	}
	var r probe.AllocResult
	perr := s.probeFor(ctx, c, "alloc", probe.AllocArgs{MB: 2048, ChunkMB: 16}, &r, 2*time.Minute)
	killed := perr != nil && strings.Contains(perr.Error(), "exit 137") // the guest's own OOM killer
	rec, gerr := s.c.Get(ctx, c.id)
	for i := 0; perr != nil && !killed && gerr == nil && rec.State == "running" && i < 30; i++ {
		time.Sleep(time.Second) // the daemon notices a sandbox gone within seconds
		rec, gerr = s.c.Get(ctx, c.id)
	}
	_, berr := s.answers(ctx, s.b)
	state := "unknown"
	if gerr == nil {
		state = rec.State + " " + rec.EndReason
	}
	ended := gerr == nil && rec.State != "running"
	bounded := perr == nil && r.TouchedMB <= 128+64
	return verdict((ended || bounded || killed) && berr == nil, tried, "touched %d MiB (%s; probe: %v); the sandbox is %s; the neighbour answered: %s",
		r.TouchedMB, stopReason(r.Err), perr, state, errOK(berr))
}

func exhaustTmp(ctx context.Context, s *session) Result {
	tried := "write 2 GiB each into /tmp and /dev/shm of a sandbox with 256 MiB of memory and disk"
	f, err := s.create(ctx, "tmp", apiv1.CreateSandboxRequest{MemoryMB: 256, DiskMB: 256})
	if err != nil {
		return inconclusive(tried, err)
	}
	var ev []string
	for _, p := range []string{"/tmp/corral-selftest-fill", "/dev/shm/corral-selftest-fill"} {
		var r probe.FillResult
		if err := s.probeFor(ctx, f, "fill", probe.FillArgs{Path: p, MaxBytes: 2 << 30, Seconds: 90}, &r, 3*time.Minute); err != nil {
			ev = append(ev, p+": "+err.Error())
			break
		}
		ev = append(ev, fmt.Sprintf("%s: %d MiB %s", p, r.Bytes/mib, stopReason(r.Err)))
	}
	hostBytes := allocatedBytes(s.sandboxDir(f))
	bound := int64(256+128) * mib
	_, berr := s.answers(ctx, s.b)
	return verdict(hostBytes <= bound && berr == nil, tried, "%s; the sandbox's host directory held %d MiB (bound %d); the neighbour answered: %s",
		strings.Join(ev, "; "), hostBytes/mib, bound/mib, errOK(berr))
}
