package gvisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"corral/internal/runtime"
)

// Paths of the agent inside the guest.
const (
	guestAgentPath = "/.corral/corral"
	guestChanDir   = "/.corral/run"
	agentSocket    = "agent.sock"
)

// Names inside a sandbox directory.
const (
	bundleDirName = "bundle"
	upperDirName  = "upper"
	chanDirName   = "chan" // a bounded tmpfs (boundfs.Channel)
	logDirName    = "log"  // a bounded tmpfs (boundfs.Logs)
	consoleLog    = "log/console.log"
	// legacyConsoleLog is where a sandbox started before the log mount
	// has its console.
	legacyConsoleLog = "console.log"
	networkFile      = "network" // runsc --network mode of the sandbox
	overlayFile      = "overlay" // runsc --overlay2 of the sandbox
)

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// nofile is PID 1's RLIMIT_NOFILE (soft and hard).
const nofile = 1048576

// cpuPeriod is the CFS period for CPU limits, in microseconds.
const cpuPeriod = 100_000

// capabilities are the guest's capabilities: the container default of
// Docker and containerd, which is what runsc grants under them (runsc's own
// `runsc spec` keeps only three, too few for an agent that switches users
// and chowns files). They exist only in gVisor's emulated kernel.
var capabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// buildSpec returns the OCI spec of the sandbox p, whose directory layout is
// described in the package comment.
//
// The root is NOT marked read-only: runsc disables the --overlay2 layer on a
// read-only root, leaving the guest no writable /. With the overlay, the
// gofer opens the shared root filesystem read-only and every write lands in
// the private layer.
func buildSpec(p runtime.StartParams, cgroupsPath string) *specs.Spec {
	spec := baseSpec(p, cgroupsPath)
	spec.Mounts = append(spec.Mounts, volumeMounts(p.Volumes)...)
	return spec
}

func baseSpec(p runtime.StartParams, cgroupsPath string) *specs.Spec {
	env := append([]string(nil), p.Env...)
	if !hasEnv(env, "PATH") {
		env = append(env, defaultPath)
	}
	caps := append([]string(nil), capabilities...)
	hostname := p.Hostname
	if hostname == "" {
		hostname = p.ID
	}
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User: specs.User{UID: 0, GID: 0},
			Args: agentArgs(p),
			Env:  env,
			Cwd:  "/",
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: nofile, Soft: nofile}},
			// Setuid binaries work inside (sudo, as E2B's template gives
			// its user), as under Docker's default: the guest's root is
			// gVisor's emulated root with the capabilities above, and the
			// boundary is the user-space kernel, not the guest's uids.
			NoNewPrivileges: false,
		},
		Root:     &specs.Root{Path: p.RootFS, Readonly: false},
		Hostname: hostname,
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs"},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: shmOptions(p.Resources)},
			// runsc mounts a tmpfs (RAM) over an empty /tmp of its own
			// accord; a mount below /tmp makes /tmp non-empty, so it stays
			// on the root's writable layer: on disk, bounded by DiskMB. See
			// tmpKeeper.
			tmpKeeper,
			{Destination: "/sys", Type: "sysfs", Source: "sysfs",
				Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: guestAgentPath, Type: "bind", Source: p.AgentBinary,
				Options: []string{"bind", "ro"}},
			{Destination: guestChanDir, Type: "bind", Source: filepath.Join(p.Dir, chanDirName),
				Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: cgroupsPath,
			Resources:   buildResources(p.Resources),
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace, Path: p.NetnsPath},
			},
		},
	}
}

// tmpKeeper is a small tmpfs at the conventional X11 socket directory
// (1777, as on a desktop system). Its only job is to exist: runsc leaves
// /tmp alone when something is mounted inside it, so /tmp is part of the
// root's writable layer (disk, bounded by --disk) instead of a RAM tmpfs
// that would count against the memory limit and kill the sandbox when
// filled.
var tmpKeeper = specs.Mount{Destination: "/tmp/.X11-unix", Type: "tmpfs", Source: "x11",
	Options: []string{"nosuid", "nodev", "noexec", "mode=1777", "size=1m"}}

// shmOptions bounds /dev/shm to half the sandbox's memory limit, as Linux
// sizes a tmpfs by default (so df shows a truthful figure, not the host's).
func shmOptions(res runtime.Resources) []string {
	opts := []string{"nosuid", "noexec", "nodev", "mode=1777"}
	if res.MemoryLimitMB > 0 {
		opts = append(opts, fmt.Sprintf("size=%dm", max(res.MemoryLimitMB/2, 1)))
	}
	return opts
}

// buildResources maps Corral's resources onto OCI linux.resources, which
// runsc applies to the sandbox cgroup (v1 values; runsc converts them for
// cgroup v2: shares to weight, reservation to memory.low).
func buildResources(res runtime.Resources) *specs.LinuxResources {
	r := &specs.LinuxResources{}
	if res.CPURequestMilli > 0 || res.CPULimitMilli > 0 {
		r.CPU = &specs.LinuxCPU{}
		if res.CPURequestMilli > 0 {
			// 1024 shares per core, as Kubernetes and Docker count them.
			shares := uint64(max(res.CPURequestMilli*1024/1000, 2))
			r.CPU.Shares = &shares
		}
		if res.CPULimitMilli > 0 {
			quota := max(res.CPULimitMilli*cpuPeriod/1000, 1000)
			period := uint64(cpuPeriod)
			r.CPU.Quota, r.CPU.Period = &quota, &period
		}
	}
	if res.MemoryLimitMB > 0 || res.MemoryRequestMB > 0 {
		r.Memory = &specs.LinuxMemory{}
		if res.MemoryLimitMB > 0 {
			limit := res.MemoryLimitMB << 20
			// memory+swap equal to memory: the sandbox cannot swap its way
			// past the limit.
			swap := limit
			r.Memory.Limit, r.Memory.Swap = &limit, &swap
		}
		if res.MemoryRequestMB > 0 {
			reservation := res.MemoryRequestMB << 20
			r.Memory.Reservation = &reservation
		}
	}
	if res.PidsLimit > 0 {
		r.Pids = &specs.LinuxPids{Limit: &res.PidsLimit}
	}
	return r
}

// hasEnv reports whether env sets key.
func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}

// writeSpec writes spec as dir/config.json.
func writeSpec(dir string, spec *specs.Spec) error {
	b, err := json.MarshalIndent(spec, "", "\t")
	if err != nil {
		return fmt.Errorf("encoding OCI spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		return fmt.Errorf("writing OCI spec: %w", err)
	}
	return nil
}

// agentArgs is PID 1's command line: the agent, its channel, and the
// resolvers it writes into /etc/resolv.conf.
func agentArgs(p runtime.StartParams) []string {
	args := []string{guestAgentPath, "agent", "--listen", "unix:" + guestChanDir + "/" + agentSocket}
	for _, ns := range p.Nameservers {
		args = append(args, "--nameserver", ns)
	}
	return args
}
