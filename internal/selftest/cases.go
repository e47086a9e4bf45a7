package selftest

import (
	"context"
	"fmt"
	"strings"
)

// aCase is one attempt of the selftest; only, when set, names the one
// runtime it applies to. An alone case runs after every runtime's other
// cases, one runtime at a time (the sessions run the others side by side):
// it times a neighbour, weighs the daemon's memory, or changes the host.
// An own case attacks from sandboxes of its own, not the attacker, so it
// runs beside the attacker's cases (session.runCases).
type aCase struct {
	name  string
	only  string
	alone bool
	own   bool
	run   func(context.Context, *session) Result
}

// cases run in this order: the controls first (so the network cases mean
// something), the ones that break a sandbox last.
var cases = []aCase{
	{name: "reach/control", run: reachControl},
	{name: "reach/host-addresses", run: reachHostAddresses},
	{name: "reach/host-lan", alone: true, run: reachHostLAN},
	{name: "reach/metadata", run: func(ctx context.Context, s *session) Result { return reachInternal(ctx, s, metadataAddr) }},
	{name: "reach/internal-range", run: func(ctx context.Context, s *session) Result { return reachInternal(ctx, s, internalAddr) }},
	{name: "reach/other-sandbox", run: reachOtherSandbox},
	{name: "reach/host-processes", run: reachHostProcesses},
	{name: "reach/host-files", run: reachHostFiles},
	{name: "reach/host-kernel", run: reachHostKernel},
	{name: "reach/host-devices", run: reachHostDevices},
	{name: "reach/kernel-log", run: reachKernelLog},
	{name: "escape/mounts", run: escapeMounts},
	{name: "escape/kernel-settings", run: escapeKernelSettings},
	{name: "escape/ptrace", run: escapePtrace},
	{name: "escape/kernel-surface", run: escapeKernelSurface},
	{name: "escape/raw-socket", run: escapeRawSocket},
	{name: "leak/tokens-inside", run: leakTokensInside},
	{name: "leak/secret-at-rest", run: leakSecretAtRest},
	{name: "leak/files-at-rest", run: leakFilesAtRest},
	{name: "leak/console-origin", run: leakConsoleOrigin},
	{name: "leak/signed-url-forever", run: leakSignedForever},
	{name: "leak/secret-header-trace", run: leakSecretTrace},
	{name: "exhaust/output", alone: true, run: exhaustOutput},
	{name: "exhaust/inodes-fds", own: true, run: exhaustInodesFDs},
	{name: "exhaust/disk", own: true, run: exhaustDisk},
	{name: "exhaust/host-backed-paths", run: exhaustHostBacked},
	{name: "exhaust/fork", own: true, run: exhaustFork},
	{name: "exhaust/cpu-neighbour", alone: true, run: exhaustCPU},
	{name: "exhaust/connections", run: exhaustConnections},
	{name: "exhaust/decision-log", run: exhaustDecisionLog},
	{name: "exhaust/port-trail", run: exhaustPortTrail},
	{name: "exhaust/dns-upstream", run: exhaustDNSUpstream},
	{name: "hide/probe-in-flood", run: hideProbeInFlood},
	{name: "exhaust/snapshots", run: exhaustSnapshots},
	{name: "exhaust/memory", own: true, run: exhaustMemory},
	{name: "exhaust/tmp", own: true, run: exhaustTmp},
	{name: "escape/agent-channel", own: true, run: escapeAgentChannel},
	{name: "outlive/rm", own: true, run: outliveRm},
}

// Names lists the cases in order, for help text.
func Names() []string {
	out := make([]string, len(cases))
	for i, c := range cases {
		out[i] = c.name
	}
	return out
}

func verdict(ok bool, tried, evidence string, a ...any) Result {
	st := Uncontained
	if ok {
		st = Contained
	}
	return Result{Tried: tried, Status: st, Evidence: fmt.Sprintf(evidence, a...)}
}

func inconclusive(tried string, err error) Result {
	return Result{Tried: tried, Status: Inconclusive, Evidence: err.Error()}
}

// joinMax joins at most n items, saying how many more there were.
func joinMax(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:n], "; "), len(items)-n)
}
