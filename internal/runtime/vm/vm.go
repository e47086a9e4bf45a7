// Package vm is the QEMU backend: each sandbox is a full Linux guest (the
// Debian cloud kernel) under qemu-system-x86_64, accelerated by KVM where
// /dev/kvm is usable and emulated by TCG otherwise.
//
// # A sandbox's machine
//
//   - kernel and initramfs: the kernel deps.sh unpacks; an initramfs built
//     here (cached per kernel and agent binary) holding the corral binary as
//     /init (package vminit) and the modules needed to reach the disks and
//     the agent channel;
//   - three virtio disks, found by serial: the image's root file system as
//     a read-only ext4 image (built once per root directory and shared by
//     every sandbox of it), a private sparse ext4 scratch disk of DiskMB
//     (config.json, and the upper layer of the guest's root overlay), and
//     the kernel's modules (read-only, at /lib/modules/<release>, so
//     modprobe works in the guest);
//   - the agent channel: a virtio-serial port named corral.agent, whose host
//     end is the unix socket <dir>/agent.sock; the same agent and protocol
//     as gVisor sandboxes;
//   - the network: the sandbox's namespace as the network layer prepared it,
//     with the address moved off its veth onto the guest, the veth and a tap
//     device bridged, and QEMU driving the tap;
//   - resources: vCPUs and RAM from the limits, QEMU in the cgroup
//     <CgroupParent>/<id> with the CPU quota and RAM plus QEMU's overhead as
//     its memory limit, and a balloon with free page reporting so an idle
//     guest gives memory back.
//
// # Lifecycle
//
// QEMU runs in the foreground as the daemon's child (it outlives a daemon
// restart; launch.go) with its pid in <dir>/qemu.pid, as a uid of its own
// and under its full seccomp sandbox; its console and stderr are on a
// bounded tmpfs at <dir>/log. <StateDir>/sandboxes/<id> names the sandbox
// directory so List finds every VM this runtime started. Every boot has a deadline: a
// guest that has not reached its agent in time is killed and booted once
// more (cold boots can hang: see docs/ARCHITECTURE.md), and which
// accelerator and machine type ran is recorded in <dir>/vm.json. Destroy
// kills QEMU, removes its cgroup and every file.
//
// Another VMM (Cloud Hypervisor, Firecracker) fits behind the same
// boundary: it needs a kernel with the same modules, the three disks, a
// byte stream to the guest's agent (virtio-vsock or a serial port) and a
// tap device; vminit and everything above the runtime stay as they are.
//
// This package imports the runtime contract, cgroups, boundfs and vminit's
// config contract; never the daemon, the store or the API.
package vm

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"golang.org/x/sys/unix"

	"corral/internal/cgroups"
	"corral/internal/errdefs"
	"corral/internal/keylimit"
	"corral/internal/runtime"
)

// Config configures the QEMU backend.
type Config struct {
	// QEMUPath is qemu-system-x86_64; default: found on PATH.
	QEMUPath string
	// KernelDir holds vmlinuz and lib/modules/<release> (deps.sh:
	// <state>/vm/kernel/current).
	KernelDir string
	// StateDir holds the runtime's caches (disk images, initramfs) and its
	// index of sandboxes (e.g. <state>/vm).
	StateDir string
	// AgentBinary is the corral binary that becomes the guest's /init.
	AgentBinary string
	// Accel is "kvm", "tcg" or "" (KVM when usable, else TCG).
	Accel string
	// Machine is the QEMU machine type; default "q35" (microvm's firmware
	// hung in a quarter of cold boots here).
	Machine string
	// CgroupParent is where each sandbox's QEMU gets <CgroupParent>/<id>;
	// default "/corral-vm".
	CgroupParent string
	Logger       *slog.Logger
}

// Runtime is the QEMU backend. Like gvisor's, it keeps no per-sandbox state
// in memory: a Ref finds everything again after a daemon restart.
type Runtime struct {
	cfg    Config
	log    *slog.Logger
	kernel kernel

	// locks serialises the building of each cached artefact.
	locks keylimit.Mutex
}

var _ runtime.Runtime = (*Runtime)(nil)

// New checks that QEMU and the kernel are installed and picks the
// accelerator.
func New(cfg Config) (*Runtime, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.QEMUPath == "" {
		p, err := exec.LookPath("qemu-system-x86_64")
		if err != nil {
			return nil, fmt.Errorf("%w: qemu-system-x86_64 not found (scripts/deps.sh installs it)", errdefs.ErrNotSupported)
		}
		cfg.QEMUPath = p
	}
	k, err := findKernel(cfg.KernelDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errdefs.ErrNotSupported, err)
	}
	if cfg.AgentBinary == "" || cfg.StateDir == "" {
		return nil, errdefs.Invalid("config", "AgentBinary and StateDir are required")
	}
	switch cfg.Accel {
	case "":
		cfg.Accel = "tcg"
		if kvmUsable() {
			cfg.Accel = "kvm"
		}
	case "kvm", "tcg":
	default:
		return nil, errdefs.Invalid("accel", "want kvm or tcg, not %q", cfg.Accel)
	}
	if cfg.Machine == "" {
		cfg.Machine = "q35"
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "/corral-vm"
	}
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "sandboxes"), filepath.Join(cfg.StateDir, "disks")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	r := &Runtime{cfg: cfg, log: cfg.Logger, kernel: k}
	if err := cgroups.WeighAsCPUs(cfg.CgroupParent, goruntime.NumCPU()); err != nil {
		r.log.Warn("cannot weigh the guests' parent cgroup", "op", "init", "cgroup", cfg.CgroupParent, "err", err)
	}
	if _, err := r.PruneCaches(); err != nil {
		cfg.Logger.Warn("pruning vm disk caches", "err", err)
	}
	cfg.Logger.Info("vm runtime ready", "op", "init", "accel", cfg.Accel, "machine", cfg.Machine, "kernel", k.release, "qemu", cfg.QEMUPath)
	return r, nil
}

// Name is the runtime's API name.
func (r *Runtime) Name() string { return "vm" }

// Accel is the accelerator guests run with ("kvm" or "tcg").
func (r *Runtime) Accel() string { return r.cfg.Accel }

// KernelRelease is the guest kernel's release (what uname -r prints).
func (r *Runtime) KernelRelease() string { return r.kernel.release }

// kvmUsable reports whether /dev/kvm can run an ordinary guest: it opens,
// speaks the stable API, and is backed by hardware virtualisation
// (kvm_intel or kvm_amd). Some hosts that are VMs themselves offer /dev/kvm
// through kvm_pvm, which only runs guest kernels built for PVM; a Debian
// kernel hangs there before printing anything (seen on this project's
// machines), so that counts as unusable.
func kvmUsable() bool {
	hw := false
	for _, m := range []string{"kvm_intel", "kvm_amd"} {
		if _, err := os.Stat(filepath.Join("/sys/module", m)); err == nil {
			hw = true
		}
	}
	if !hw {
		return false
	}
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	const kvmGetAPIVersion = 0xAE00
	v, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), kvmGetAPIVersion, 0)
	return errno == 0 && v == 12
}

// lockKey serialises work on one key (a cached artefact's path).
func (r *Runtime) lockKey(key string) func() { return r.locks.Lock(key) }

func (r *Runtime) cgroup(id string) string { return filepath.Join(r.cfg.CgroupParent, id) }
func (r *Runtime) indexPath(id string) string {
	return filepath.Join(r.cfg.StateDir, "sandboxes", id)
}

// lastLine is the last non-empty line of b.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
