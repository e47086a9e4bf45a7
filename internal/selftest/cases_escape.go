package selftest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"corral/internal/selftest/probe"
	"corral/pkg/apiv1"
)

func escapeMounts(ctx context.Context, s *session) Result {
	tried := "mount a devtmpfs and every block device in it, bind /, mount proc, open_by_handle_at the root inode; look for the host's marker files through each"
	var r probe.MountsResult
	err := s.probeFor(ctx, s.a, "mounts", probe.MountsArgs{Marker: "corral-selftest-" + s.nonce + "-host", MaxEntries: 300000}, &r, 5*time.Minute)
	if err != nil {
		return inconclusive(tried, err)
	}
	var ev []string
	for _, t := range r.Tries {
		ev = append(ev, t.What+": "+orOK(t.Err))
	}
	return verdict(len(r.Found) == 0, tried, "host markers found: %d (%s); %s", len(r.Found), joinMax(r.Found, 2), strings.Join(ev, ", "))
}

func escapeKernelSettings(ctx context.Context, s *session) Result {
	tried := "write /proc/sys/kernel/core_pattern (a pipe to a program, run as root by a host kernel) and the hostname"
	r := s.runProcSys(ctx)
	if r.err != nil {
		return inconclusive(tried, r.err)
	}
	var ev []string
	for _, t := range r.Tries {
		if strings.HasPrefix(t.What, "write") || t.What == "sethostname" {
			ev = append(ev, t.What+": "+orOK(t.Err))
		}
	}
	same := r.hostBefore == r.hostAfter
	return verdict(same, tried, "host core_pattern %q and hostname %q unchanged: %v; inside: %s",
		r.hostAfter[0], r.hostAfter[1], same, strings.Join(ev, ", "))
}

func escapePtrace(ctx context.Context, s *session) Result {
	tried := "PTRACE_ATTACH to every visible process"
	var r probe.PtraceResult
	if err := s.probe(ctx, s.a, "ptrace", nil, &r); err != nil {
		return inconclusive(tried, err)
	}
	var host []string
	for _, a := range r.Attached {
		if strings.Contains(a, "corral-selftest-host-"+s.nonce) {
			host = append(host, a)
		}
	}
	return verdict(len(host) == 0, tried, "attached to %d of %d visible processes, all the sandbox's own (the host's marker process is not among them: %d)",
		len(r.Attached), r.Visible, len(host))
}

func escapeKernelSurface(ctx context.Context, s *session) Result {
	tried := "init_module, finit_module, kexec_load, bpf, perf_event_open, userfaultfd, io_uring_setup, iopl, ioperm"
	before := readTrim("/proc/modules")
	res := map[string]string{}
	if err := s.probe(ctx, s.a, "syscalls", nil, &res); err != nil {
		return inconclusive(tried, err)
	}
	after := readTrim("/proc/modules")
	names := make([]string, 0, len(res))
	for k := range res {
		names = append(names, k)
	}
	sort.Strings(names)
	var ev []string
	for _, k := range names {
		ev = append(ev, k+": "+orOK(res[k]))
	}
	where := "gVisor's own kernel (the sentry) answered each"
	if s.rt == "vm" {
		where = "the guest's own kernel answered each"
	}
	return verdict(before == after, tried, "host module list unchanged: %v; %s: %s", before == after, where, strings.Join(ev, ", "))
}

func escapeRawSocket(ctx context.Context, s *session) Result {
	spoof := []string{s.b.addr(), "198.51.100.77"}
	tried := fmt.Sprintf("open raw and packet sockets; send UDP to the fake internet with forged sources %s", strings.Join(spoof, ", "))
	payload := "spoof-" + s.nonce
	var r probe.RawResult
	err := s.probe(ctx, s.a, "rawsock", probe.RawArgs{Dst: internetAddr, Port: worldUDPPort, Spoof: spoof, Payload: payload}, &r)
	if err != nil {
		return inconclusive(tried, err)
	}
	settle()
	seen := s.w.seen.matching(payload)
	var from []string
	for _, x := range seen {
		from = append(from, x.From)
	}
	return verdict(len(seen) == 0, tried, "raw socket: %s; packet socket: %s; forged datagrams sent %d, received by the fake internet %d %s",
		orOK(r.RawErr), orOK(r.PacketErr), len(r.Sent), len(seen), strings.Join(from, " "))
}

// escapeAgentChannel hijacks a fresh sandbox's agent channel and stops
// the agent if it can; the daemon must either keep talking to the real
// agent or end the sandbox saying why, never trust the fake or hang.
func escapeAgentChannel(ctx context.Context, s *session) Result {
	tried := "replace the agent's socket with a fake that answers garbage, write to a vm agent's virtio port, SIGSTOP the agent (PID 1)"
	e, err := s.create(ctx, "channel", apiv1.CreateSandboxRequest{MemoryMB: 256})
	if err != nil {
		return inconclusive(tried, err)
	}
	sock := ""
	if s.rt == "gvisor" {
		sock = "/.corral/run/agent.sock"
	}
	_, stop, err := s.background(ctx, e, "hijack", probe.HijackArgs{Socket: sock, Seconds: 60}, nil)
	if err != nil {
		return inconclusive(tried, err)
	}
	defer stop()
	time.Sleep(3 * time.Second)
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		rec, err := s.c.Get(ctx, e.id)
		if err == nil && rec.State != "running" {
			evs, _ := s.c.Events(ctx, e.id)
			return verdict(mentionsChannel(evs), tried, "the sandbox ended (%s, %s); its events: %s", rec.State, rec.EndReason, lastEvents(evs, 3))
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var out strings.Builder
		res, err := s.c.Run(cctx, e.id, apiv1.ExecRequest{Cmd: []string{"echo", "agent-" + s.nonce}}, nil, &out, &strings.Builder{})
		cancel()
		if err == nil && res.ExitCode == 0 {
			ok := strings.TrimSpace(out.String()) == "agent-"+s.nonce
			return verdict(ok, tried, "the daemon still runs commands through the real agent: echo answered %q", strings.TrimSpace(out.String()))
		}
		last = fmt.Sprint(err)
		time.Sleep(2 * time.Second)
	}
	return verdict(false, tried, "for 90 s the sandbox stayed running with no working agent and no event (last exec error: %s)", last)
}

func mentionsChannel(evs []apiv1.Event) bool {
	for _, e := range evs {
		t := strings.ToLower(e.Kind + " " + e.Message)
		if strings.Contains(t, "channel") || strings.Contains(t, "hijack") || strings.Contains(t, "silen") {
			return true
		}
	}
	return false
}

func lastEvents(evs []apiv1.Event, n int) string {
	if len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind+": "+e.Message)
	}
	return strings.Join(out, "; ")
}
