package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"corral/internal/daemon"
	"corral/internal/manager"
)

// addShareFlags adds the serve flags of admission by resources, the fair
// shares of the daemon's connection services and the snapshot quotas
// (daemon.Shares).
func addShareFlags(f *pflag.FlagSet, s *daemon.Shares) {
	f.Float64Var(&s.MemoryOvercommit, "memory-overcommit", daemon.DefaultMemoryOvercommit,
		"admit sandboxes while their memory requests add up to at most this times the host's memory (less 2 GiB for the host and --reserve-memory for the daemon)")
	f.Int64Var(&s.ReserveMemoryMB, "reserve-memory", 0,
		fmt.Sprintf("MiB of the host's memory admission keeps for the daemon itself; 0: %d, at most a quarter of the host's share", daemon.DefaultReserveMemoryMB))
	f.Float64Var(&s.CPUOvercommit, "cpu-overcommit", daemon.DefaultCPUOvercommit,
		"admit sandboxes while their CPU requests add up to at most this times the host's CPUs")
	f.IntVar(&s.EgressConns, "egress-max-conns", 0,
		"egress proxy connections, all sandboxes together; 0: sized to the host (a quarter of RLIMIT_NOFILE, a sixteenth of the memory at 96 KiB each)")
	f.IntVar(&s.EgressConnsPerSandbox, "egress-max-conns-per-sandbox", 0,
		fmt.Sprintf("egress proxy connections of one sandbox; 0: %d, at most an eighth of --egress-max-conns", daemon.DefaultEgressConnsPerSandbox))
	f.IntVar(&s.EgressGuaranteedConns, "egress-guaranteed-conns", 0,
		fmt.Sprintf("egress proxy connections each sandbox gets whatever the others hold; 0: %d", daemon.DefaultEgressGuaranteedConns))
	f.IntVar(&s.DNSInFlight, "dns-max-inflight", 0,
		fmt.Sprintf("resolver queries waiting on the upstream, all sandboxes together; 0: %d", daemon.DefaultDNSInFlight))
	f.IntVar(&s.DNSInFlightPerSandbox, "dns-max-inflight-per-sandbox", 0,
		fmt.Sprintf("resolver queries of one sandbox waiting on the upstream; 0: %d", daemon.DefaultDNSInFlightPerSandbox))
	f.IntVar(&s.DNSGuaranteedInFlight, "dns-guaranteed-inflight", 0,
		fmt.Sprintf("resolver queries in flight each sandbox gets whatever the others hold; 0: %d", daemon.DefaultDNSGuaranteedInFlight))
	f.IntVar(&s.PortConns, "port-max-conns", 0,
		"exposed-port connections, all sandboxes together; 0: sized to the host (an eighth of RLIMIT_NOFILE)")
	f.IntVar(&s.PortConnsPerSandbox, "port-max-conns-per-sandbox", 0,
		fmt.Sprintf("exposed-port connections of one sandbox; 0: %d, at most an eighth of --port-max-conns", manager.DefaultMaxPortConnsPerSandbox))
	f.IntVar(&s.PortGuaranteedConns, "port-guaranteed-conns", 0,
		fmt.Sprintf("exposed-port connections each sandbox gets whatever the others hold; 0: %d", manager.DefaultGuaranteedPortConns))
	f.IntVar(&s.SnapshotsPerSandbox, "snapshot-quota-per-sandbox", 0,
		fmt.Sprintf("memory snapshots of one sandbox kept at once; 0: %d", manager.DefaultSnapshotsPerSandbox))
	f.Int64Var(&s.SnapshotQuotaMB, "snapshot-quota-mb", 0,
		"MiB of memory snapshots kept, all together; 0: half the state directory's filesystem")
	f.Int64Var(&s.SnapshotMinFreeMB, "snapshot-min-free-mb", 0,
		fmt.Sprintf("MiB a memory snapshot must leave free on the state directory's filesystem (after its estimated size); 0: %d", manager.DefaultSnapshotMinFreeMB))
}
