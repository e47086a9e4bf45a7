package vm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"syscall"

	"corral/internal/cgroups"
	"corral/internal/runtime"
	"corral/internal/vminit"
)

// Guest sizing.
const (
	defaultRAMMB = 512
	// minRAMMB is the least RAM a guest boots with: its kernel unpacks
	// the initramfs, which holds the agent (the corral binary, about
	// 50 MB now), into RAM while the archive is still there, so 128 MiB
	// no longer boots ("Initramfs unpacking failed: write error"), and
	// 192 MiB stopped booting once the binary passed ≈ 49.7 MB. A
	// smaller memory request gets this much.
	minRAMMB = 256
	// QEMU's own memory beside the guest's RAM: its code, device state
	// and, under TCG, the translation cache (bounded by tbSizeMB).
	overheadMB    = 192
	tbSizeMB      = 64
	defaultDiskMB = 10 * 1024
	qemuPids      = 1024
	// qemuUser is who QEMU runs as when the machine has no uid of its
	// own (one recorded before per-sandbox uids).
	qemuUser = "nobody"
	// agentPortID is the QEMU id of the agent's virtio-serial port.
	agentPortID = "agentport"
	// balloonID is the QEMU id of the balloon.
	balloonID = "balloon0"
)

// machine is everything one boot needs: what machine.json records, and
// the files QEMU inherits.
type machine struct {
	machineRecord
	tap      *os.File // nil without a network
	incoming *os.File // the saved state to resume from; nil on a cold boot
}

func (m *machine) close() {
	if m.tap != nil {
		m.tap.Close()
	}
}

// prepare builds (or finds cached) the initramfs and disk images, makes
// the scratch disk and plugs the network.
func (r *Runtime) prepare(ctx context.Context, p runtime.StartParams) (*machine, error) {
	m := &machine{machineRecord: machineRecord{MAC: guestMAC(p.ID), Netns: p.NetnsPath}}
	var err error
	if m.UID, err = r.allocUID(p.ID); err != nil {
		return nil, fmt.Errorf("QEMU uid: %w", err)
	}
	if m.Initramfs, err = r.initramfs(); err != nil {
		return nil, fmt.Errorf("initramfs: %w", err)
	}
	name, err := rootDiskName(p.RootFS)
	if err != nil {
		return nil, err
	}
	if m.RootDisk, err = r.roDisk(ctx, p.RootFS, name); err != nil {
		return nil, err
	}
	if m.ModulesDisk, err = r.roDisk(ctx, r.kernel.modulesDir(), "modules-"+r.kernel.release); err != nil {
		return nil, err
	}
	mods, err := r.kernel.moduleClosure(modulesFor(p))
	if err != nil {
		return nil, err
	}
	cfg := vminit.Config{Hostname: p.Hostname, Env: p.Env, Nameservers: p.Nameservers, KernelRelease: r.kernel.release, Modules: mods}
	if p.NetnsPath != "" {
		if cfg.Network, m.tap, err = plugNetwork(p.NetnsPath, m.MAC); err != nil {
			return nil, err
		}
	}
	diskMB := p.Resources.DiskMB
	if diskMB <= 0 {
		diskMB = defaultDiskMB
	}
	if m.Scratch, err = scratchDisk(ctx, p.Dir, diskMB, cfg); err != nil {
		m.close()
		return nil, err
	}
	m.sizing(p.Resources, r.cfg)
	m.Info.Kernel = r.kernel.release
	return m, nil
}

func (r *Runtime) initramfs() (string, error) {
	unlock := r.lockKey("initramfs")
	defer unlock()
	return r.kernel.initramfs(filepath.Join(r.cfg.StateDir, "disks"), r.cfg.AgentBinary)
}

// sizing turns the sandbox's resources into vCPUs, RAM and cgroup limits.
func (m *machine) sizing(res runtime.Resources, cfg Config) {
	cpuMilli := max(res.CPULimitMilli, res.CPURequestMilli, 1000)
	vcpus := int((cpuMilli + 999) / 1000)
	vcpus = min(vcpus, goruntime.NumCPU())
	ram := res.MemoryLimitMB
	if ram <= 0 {
		ram = res.MemoryRequestMB
	}
	if ram <= 0 {
		ram = defaultRAMMB
	}
	ram = max(ram, minRAMMB)
	weight := uint64(max(res.CPURequestMilli, 10) / 10)
	m.Limits = cgroups.Limits{
		CPUWeight: min(max(weight, 1), 10000), CPUQuotaMilli: res.CPULimitMilli,
		MemoryBytes: (ram + overheadMB) << 20, Pids: qemuPids,
	}
	m.Info = Info{Accel: cfg.Accel, Machine: cfg.Machine, VCPUs: vcpus, RAMMB: ram}
}

// fdPass collects the files a QEMU command inherits (ExtraFiles): the
// i-th is descriptor 3+i in QEMU.
type fdPass struct{ files []*os.File }

func (p *fdPass) add(f *os.File) int {
	p.files = append(p.files, f)
	return 2 + len(p.files)
}

// close closes the files (once).
func (p *fdPass) close() {
	for _, f := range p.files {
		f.Close()
	}
	p.files = nil
}

// qemuArgs is the QEMU command line for m and the files it inherits (the
// caller closes them once QEMU started). QEMU opens no path of the sandbox
// directory itself: it starts unprivileged (launch), so its listening
// sockets, console, kernel and initramfs come as descriptors (io), and
// its disks as descriptors in fd sets, read-only and (for the scratch
// disk) read-write, which a migration reopens read-only from the set.
func (r *Runtime) qemuArgs(p runtime.StartParams, m *machine, io *qemuIO) ([]string, *fdPass, error) {
	accel := "kvm"
	cpu := "host"
	if r.cfg.Accel == "tcg" {
		accel, cpu = "tcg,tb-size="+strconv.Itoa(tbSizeMB), "max"
	}
	pass := &fdPass{}
	fd := func(f *os.File) string { return strconv.Itoa(pass.add(f)) }
	args := []string{
		"-name", "corral-" + p.ID + ",process=corral-vm-" + p.ID,
		"-machine", r.cfg.Machine, "-accel", accel, "-cpu", cpu,
		"-smp", strconv.Itoa(m.Info.VCPUs), "-m", strconv.FormatInt(m.Info.RAMMB, 10),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", "/proc/self/fd/" + fd(io.kernel), "-initrd", "/proc/self/fd/" + fd(io.initrd),
		// no_timer_check: the kernel's boot-time check that the timer
		// interrupt reaches it through the IO-APIC fails when a TCG guest is
		// starved of CPU on a loaded host, and it then panics ("IO-APIC +
		// timer doesn't work"); seen in a CI run. The timer is QEMU's own.
		"-append", "console=ttyS0 quiet panic=-1 no_timer_check -- vminit",
		// The console: appended to (the daemon truncates it when it
		// rotates it) on the sandbox's bounded log mount.
		"-add-fd", "fd=" + fd(io.console) + ",set=" + strconv.Itoa(consoleFDSet),
		"-chardev", "file,id=serial0,path=/dev/fdset/" + strconv.Itoa(consoleFDSet) + ",append=on",
		"-serial", "chardev:serial0",
		"-device", "virtio-serial-pci,id=vser",
		"-chardev", "socket,id=agent,fd=" + fd(io.agent) + ",server=on,wait=off",
		"-device", "virtserialport,bus=vser.0,chardev=agent,id=" + agentPortID + ",name=" + vminit.AgentPort,
		"-device", "virtio-balloon-pci,free-page-reporting=on,id=" + balloonID,
		"-chardev", "socket,id=qmp,fd=" + fd(io.qmp) + ",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
		// Confine QEMU: a seccomp filter without obsolete or
		// resource-control calls, without any uid or gid change, and
		// without fork or exec. It starts as a uid of its own (launch),
		// so it needs none of them.
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
	}
	for i, d := range []diskArg{
		{id: "root", file: m.RootDisk, serial: vminit.SerialRoot, ro: true},
		{id: "scratch", file: m.Scratch, serial: vminit.SerialScratch},
		{id: "modules", file: m.ModulesDisk, serial: vminit.SerialModules, ro: true},
	} {
		set := i + 1 // 1 to 3, below consoleFDSet
		modes := []int{os.O_RDONLY}
		// No image locks: the daemon alone hands out these files, and a
		// guest that runs on after a memory snapshot (whose migration
		// inactivated its disks) could not take them back.
		opts := fmt.Sprintf("file=/dev/fdset/%d,if=none,id=%s,format=raw,aio=threads,file.locking=off", set, d.id)
		if d.ro {
			opts += ",readonly=on"
		} else {
			modes = append(modes, os.O_RDWR)
			opts += ",cache=writeback,discard=unmap"
		}
		for _, mode := range modes {
			f, err := os.OpenFile(d.file, mode|syscall.O_CLOEXEC, 0)
			if err != nil {
				pass.close()
				return nil, nil, fmt.Errorf("opening disk %s: %w", d.id, err)
			}
			args = append(args, "-add-fd", fmt.Sprintf("fd=%d,set=%d", pass.add(f), set))
		}
		args = append(args, "-drive", opts, "-device", fmt.Sprintf("virtio-blk-pci,drive=%s,serial=%s", d.id, d.serial))
	}
	if m.tap != nil {
		tap, err := dupFile(m.tap)
		if err != nil {
			pass.close()
			return nil, nil, err
		}
		args = append(args, "-netdev", fmt.Sprintf("tap,id=net0,fd=%d,vhost=off", pass.add(tap)),
			"-device", "virtio-net-pci,netdev=net0,mac="+m.MAC)
	}
	if m.incoming != nil {
		in, err := dupFile(m.incoming)
		if err != nil {
			pass.close()
			return nil, nil, err
		}
		args = append(args, "-S", "-incoming", fmt.Sprintf("fd:%d", pass.add(in)))
	}
	return args, pass, nil
}

// dupFile returns a copy of f that can be closed independently.
func dupFile(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}
