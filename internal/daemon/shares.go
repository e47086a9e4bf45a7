package daemon

import (
	"fmt"
	goruntime "runtime"
	"syscall"

	"corral/internal/manager"
	"corral/internal/netpolicy/dnsd"
	"corral/internal/netpolicy/egress"
)

// Shares are the bounds that keep sandboxes from taking host resources
// from one another: admission by reserved memory and CPU, fair shares of
// the egress proxy, the resolver and the exposed-port proxy (a ceiling, a
// per-sandbox limit and a guaranteed share each), and the quotas of memory
// snapshots. Zero fields are sized from the host or take the defaults.
type Shares struct {
	MemoryOvercommit float64
	CPUOvercommit    float64
	// ReserveMemoryMB is kept out of admission for the daemon itself
	// (0: DefaultReserveMemoryMB, at most a quarter of the host's share).
	ReserveMemoryMB int64

	EgressConns, EgressConnsPerSandbox, EgressGuaranteedConns int
	DNSInFlight, DNSInFlightPerSandbox, DNSGuaranteedInFlight int
	PortConns, PortConnsPerSandbox, PortGuaranteedConns       int

	SnapshotsPerSandbox int
	SnapshotQuotaMB     int64
	SnapshotMinFreeMB   int64
}

// Default overcommit factors. Sandboxes reserve their requests; memory is
// not compressible, so its factor is small (an idle sandbox holds about
// 20 MiB of its 512 MiB default request, docs/BENCHMARKS.md); CPU is, and
// every sandbox has a CPU limit, so its factor is large.
const (
	DefaultMemoryOvercommit = 3
	DefaultCPUOvercommit    = 64
)

// DefaultReserveMemoryMB is the memory admission keeps for the daemon
// itself. It is sized for the daemon at its peak, not its RSS now: 34 MiB
// idle and 40 MiB with 21 sandboxes were measured (about 0.3 MiB a
// sandbox, so some 250 MiB at the default bound of a 24 GiB host), and
// each proxied connection holds 64 KiB of copy buffers (4,096 of them:
// 256 MiB). Admitting against the RSS of the moment would give away, on
// an empty host, what the daemon needs once the sandboxes it admitted
// run, and would make the capacity move with the garbage collector.
const DefaultReserveMemoryMB = 512

// The resolver's and the proxy's defaults, for the flags' help.
const (
	DefaultEgressConnsPerSandbox = egress.DefaultMaxConnsPerSandbox
	DefaultEgressGuaranteedConns = egress.DefaultGuaranteedConns
	DefaultDNSInFlight           = dnsd.DefaultMaxInFlightTotal
	DefaultDNSInFlightPerSandbox = dnsd.DefaultMaxInFlight
	DefaultDNSGuaranteedInFlight = dnsd.DefaultGuaranteedInFlight
)

// Sizing of the connection ceilings from the host.
const (
	// egressConnCost is the memory budgeted per proxied connection: two
	// 32 KiB copy buffers, two goroutines, two sockets' kernel buffers.
	egressConnCost = 96 << 10
	// minCeiling and maxCeiling clamp a sized ceiling.
	minCeiling = 256
	maxCeiling = 65536
)

// capacity is what admission reserves sandboxes against: the host's memory
// less what is left to the host (reservedMem) and to the daemon
// (ReserveMemoryMB), its CPUs.
func (s Shares) capacity() (manager.Capacity, error) {
	mem, err := memTotal()
	if err != nil {
		return manager.Capacity{}, err
	}
	return s.capacityOf(mem, goruntime.NumCPU())
}

// capacityOf is capacity on a host of mem bytes and cpus CPUs. The
// daemon's reserve comes off before the overcommit factor multiplies what
// is left: it is memory the daemon uses, not a request sandboxes may
// share. A default reserve is at most a quarter of the host's share; one
// the operator set that leaves nothing is refused.
func (s Shares) capacityOf(mem int64, cpus int) (manager.Capacity, error) {
	share := max(mem-reservedMem, mem/2) >> 20
	reserve := s.ReserveMemoryMB
	if reserve == 0 {
		reserve = min(DefaultReserveMemoryMB, share/4)
	}
	if reserve >= share {
		return manager.Capacity{}, fmt.Errorf("--reserve-memory %d MiB leaves no memory for sandboxes (the host's share is %d MiB)", reserve, share)
	}
	return manager.Capacity{
		MemoryMB: share - reserve, CPUMilli: int64(cpus) * 1000,
		MemoryOvercommit: orDefault(s.MemoryOvercommit, DefaultMemoryOvercommit),
		CPUOvercommit:    orDefault(s.CPUOvercommit, DefaultCPUOvercommit),
	}, nil
}

// sized fills the connection ceilings left zero from the host: the egress
// proxy may use half the daemon's descriptors (two per connection) and a
// sixteenth of the memory, the port proxy an eighth of the descriptors
// (one per connection: the sandbox side is a stream of the agent's
// connection). Per-sandbox limits left zero are at most an eighth of their
// ceiling.
func (s *Shares) sized() error {
	if err := s.check(); err != nil {
		return err
	}
	nofile, err := openFileLimit()
	if err != nil {
		return err
	}
	mem, err := memTotal()
	if err != nil {
		return err
	}
	if s.EgressConns == 0 {
		s.EgressConns = clamp(min(nofile/4, int(mem/16/egressConnCost)), minCeiling, maxCeiling)
	}
	if s.EgressConnsPerSandbox == 0 {
		s.EgressConnsPerSandbox = max(1, min(egress.DefaultMaxConnsPerSandbox, s.EgressConns/8))
	}
	if s.PortConns == 0 {
		s.PortConns = clamp(nofile/8, minCeiling, maxCeiling)
	}
	if s.PortConnsPerSandbox == 0 {
		s.PortConnsPerSandbox = max(1, min(manager.DefaultMaxPortConnsPerSandbox, s.PortConns/8))
	}
	return nil
}

// check refuses negative values, which no flag means.
func (s Shares) check() error {
	for _, f := range []struct {
		flag string
		v    float64
	}{
		{"--memory-overcommit", s.MemoryOvercommit}, {"--cpu-overcommit", s.CPUOvercommit}, {"--reserve-memory", float64(s.ReserveMemoryMB)},
		{"--egress-max-conns", float64(s.EgressConns)}, {"--egress-max-conns-per-sandbox", float64(s.EgressConnsPerSandbox)},
		{"--egress-guaranteed-conns", float64(s.EgressGuaranteedConns)}, {"--dns-max-inflight", float64(s.DNSInFlight)},
		{"--dns-max-inflight-per-sandbox", float64(s.DNSInFlightPerSandbox)}, {"--dns-guaranteed-inflight", float64(s.DNSGuaranteedInFlight)},
		{"--port-max-conns", float64(s.PortConns)}, {"--port-max-conns-per-sandbox", float64(s.PortConnsPerSandbox)},
		{"--port-guaranteed-conns", float64(s.PortGuaranteedConns)}, {"--snapshot-quota-per-sandbox", float64(s.SnapshotsPerSandbox)},
		{"--snapshot-quota-mb", float64(s.SnapshotQuotaMB)}, {"--snapshot-min-free-mb", float64(s.SnapshotMinFreeMB)},
	} {
		if f.v < 0 || f.v != f.v {
			return fmt.Errorf("%s must not be negative, got %g", f.flag, f.v)
		}
	}
	return nil
}

// snapshotQuota is the memory snapshot quotas; an overall quota left to
// the host is half the filesystem of dir (the state directory, which holds
// the snapshots).
func (s Shares) snapshotQuota(dir string) (manager.SnapshotQuota, error) {
	q := manager.SnapshotQuota{PerSandbox: s.SnapshotsPerSandbox, TotalMB: s.SnapshotQuotaMB, MinFreeMB: s.SnapshotMinFreeMB}
	if q.TotalMB <= 0 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			return q, fmt.Errorf("sizing the snapshot quota: %w", err)
		}
		q.TotalMB = int64(st.Blocks) * st.Bsize / 2 >> 20
	}
	return q, nil
}

// openFileLimit is the daemon's RLIMIT_NOFILE (Go raises the soft limit
// to the hard one at start).
func openFileLimit() (int, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	return int(min(rl.Cur, 1<<30)), nil
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

func orDefault(v, def float64) float64 {
	if v > 0 {
		return v
	}
	return def
}

// manager fills the manager's part: capacity, port connections, snapshot
// quotas.
func (s Shares) manager(c *manager.Config, stateDir string) error {
	var err error
	if c.Capacity, err = s.capacity(); err != nil {
		return fmt.Errorf("sizing the capacity: %w", err)
	}
	c.PortConns = manager.PortConns{Max: s.PortConns, PerSandbox: s.PortConnsPerSandbox, Guaranteed: s.PortGuaranteedConns}
	c.SnapshotQuota, err = s.snapshotQuota(stateDir)
	return err
}
