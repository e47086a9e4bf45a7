package vminit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Where the disks are mounted before the switch to the new root.
const (
	lowerMnt   = "/mnt/lower"
	scratchMnt = "/mnt/scratch"
	newRoot    = "/mnt/root"
	diskWait   = 10 * time.Second
)

// Main runs the guest's first stage and execs the agent; it returns only
// on failure, after powering the guest off.
func Main() int {
	err := run()
	fmt.Fprintf(os.Stderr, "corral-vminit: %v; powering off\n", err)
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	return 1
}

func run() error {
	if err := earlyMounts(); err != nil {
		return err
	}
	start := time.Now()
	if err := loadModules(ModulesList); err != nil {
		return err
	}
	logf("modules loaded in %s", time.Since(start).Round(time.Millisecond))
	cfg, err := mountRoot()
	if err != nil {
		return err
	}
	if err := setupNetwork(cfg.Network); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	logf("root mounted, network up")
	if err := switchRoot(); err != nil {
		return err
	}
	return execAgent(cfg)
}

// logf writes a line to the console, stamped with the guest's uptime
// (where the boot's time goes shows in console.log).
func logf(format string, args ...any) {
	b, _ := os.ReadFile("/proc/uptime") // "<seconds up> <seconds idle>"
	up, _, _ := strings.Cut(string(b), " ")
	fmt.Fprintf(os.Stderr, "corral-vminit: [%s] "+format+"\n", append([]any{up}, args...)...)
}

// earlyMounts gives the initramfs /dev, /proc and /sys, and points the
// standard streams at the console.
func earlyMounts() error {
	for _, m := range []struct{ src, dst, fstype string }{
		{"devtmpfs", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, unix.MS_NOSUID, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mounting %s: %w", m.dst, err)
		}
	}
	if con, err := os.OpenFile("/dev/console", os.O_RDWR, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			_ = unix.Dup2(int(con.Fd()), fd)
		}
	}
	return nil
}

// mountRoot mounts the scratch disk (reading the config from it), the
// image's root read-only, the overlay of both at newRoot, and inside it
// the kernel's modules and /.corral.
func mountRoot() (*Config, error) {
	disks, err := findDisks(diskWait, SerialRoot, SerialScratch, SerialModules)
	if err != nil {
		return nil, err
	}
	if err := mountDisk(disks[SerialScratch], scratchMnt, 0); err != nil {
		return nil, err
	}
	cfg, err := readConfig(filepath.Join(scratchMnt, ConfigPath))
	if err != nil {
		return nil, err
	}
	if err := mountDisk(disks[SerialRoot], lowerMnt, unix.MS_RDONLY); err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lowerMnt,
		filepath.Join(scratchMnt, UpperDir), filepath.Join(scratchMnt, WorkDir))
	if err := os.MkdirAll(newRoot, 0o755); err != nil {
		return nil, err
	}
	if err := unix.Mount("overlay", newRoot, "overlay", 0, opts); err != nil {
		return nil, fmt.Errorf("mounting the root overlay: %w", err)
	}
	mods := filepath.Join(newRoot, "lib/modules", cfg.KernelRelease)
	if err := os.MkdirAll(mods, 0o755); err != nil {
		return nil, err
	}
	if err := mountDisk(disks[SerialModules], mods, unix.MS_RDONLY); err != nil {
		return nil, err
	}
	for _, m := range cfg.Modules {
		if err := loadModule(filepath.Join(mods, filepath.Clean("/"+m))); err != nil {
			logf("loading %s: %v", m, err)
		}
	}
	if err := nativeDirs(); err != nil {
		return nil, err
	}
	if err := installAgent(); err != nil {
		return nil, err
	}
	// The agent exports the sandbox's changes from the overlay's upper
	// directory: keep the scratch disk reachable in the new root.
	scratch := filepath.Join(newRoot, ScratchInRoot)
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return nil, err
	}
	if err := unix.Mount(scratchMnt, scratch, "", unix.MS_MOVE, ""); err != nil {
		return nil, fmt.Errorf("moving the scratch disk: %w", err)
	}
	return cfg, nil
}

func mountDisk(dev, dst string, flags uintptr) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(dev, dst, "ext4", flags, ""); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", dev, dst, err)
	}
	return nil
}

func readConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the sandbox config: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	if cfg.KernelRelease == "" || strings.ContainsAny(cfg.KernelRelease, "/\x00") {
		return nil, fmt.Errorf("config names no usable kernel release (%q)", cfg.KernelRelease)
	}
	return &cfg, nil
}

// installAgent makes this binary /.corral/corral on a tmpfs in the new
// root, where processes of the sandbox find the agent as under gVisor: a
// read-only bind mount of the initramfs's /init. A copy cost 2.6 s of a
// TCG guest's boot (tens of MiB written page by page under emulation);
// the bind mount shares the pages the initramfs already holds, and keeps
// them once switchRoot unlinks /init.
func installAgent() error {
	dir := filepath.Join(newRoot, ".corral")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mounting /.corral: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "run"), 0o755); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dst := filepath.Join(dir, "corral")
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := unix.Mount(exe, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding the agent: %w", err)
	}
	if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making the agent read-only: %w", err)
	}
	return nil
}

// nativeDirs bind-mounts a directory of the scratch disk over each of
// NativeDirs in the new root.
func nativeDirs() error {
	for _, d := range strings.Split(NativeDirs, ":") {
		src := filepath.Join(scratchMnt, "native", strings.ReplaceAll(strings.Trim(d, "/"), "/", "-"))
		dst := filepath.Join(newRoot, d)
		for _, p := range []string{src, dst} {
			if err := os.MkdirAll(p, 0o711); err != nil {
				return err
			}
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %s: %w", d, err)
		}
	}
	return nil
}
