package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"corral/internal/boundfs"
	"corral/internal/cgroups"
	"corral/internal/cleanup"
	"corral/internal/runtime"
	"corral/internal/vminit"
)

// Files in a sandbox's directory.
const (
	pidFile     = "qemu.pid"
	agentSock   = "agent.sock"
	qmpSock     = "qmp.sock"
	consoleFile = "console.log" // on the bounded log mount (logDir)
	infoFile    = "vm.json"
	qemuLog     = "qemu.log" // QEMU's stderr, on the bounded log mount
)

// Boot deadlines, from QEMU's start to the guest's agent starting, and
// how many boots a start may take. A deadline counts QEMU's CPU time, not
// the clock's: on a loaded host (a CI run's eight runnable tasks a core)
// a TCG guest that boots in 5 s alone took over 30 s of wall time and was
// killed as hung, and booting it again only added load. A hung guest that
// spins uses its CPU time up; one that waits idle is caught by the wall
// clock at bootWallFactor times the deadline.
const (
	bootDeadlineTCG = 30 * time.Second
	bootDeadlineKVM = 10 * time.Second
	bootAttempts    = 2
	bootWallFactor  = 4
)

// Info is what <dir>/vm.json records about a sandbox's machine.
type Info struct {
	Accel   string `json:"accel"`
	Machine string `json:"machine"`
	Kernel  string `json:"kernel"`
	VCPUs   int    `json:"vcpus"`
	RAMMB   int64  `json:"ram_mb"`
	Boots   int    `json:"boots"`
	BootMS  int64  `json:"boot_ms"`
}

// Start boots a guest for p; on error nothing is left behind.
func (r *Runtime) Start(ctx context.Context, p runtime.StartParams) error {
	if err := p.Ref.Check(); err != nil {
		return err
	}
	if p.RootFS == "" {
		return fmt.Errorf("starting %s: no root filesystem", p.ID)
	}
	c := cleanup.Make(ctx)
	defer c.Clean()
	c.Add(func(ctx context.Context) {
		if err := r.Destroy(ctx, p.Ref); err != nil {
			r.log.Error("rolling back a vm start", "sandbox", p.ID, "err", err)
		}
	})
	if err := r.start(ctx, p); err != nil {
		return fmt.Errorf("starting vm %s: %w", p.ID, err)
	}
	c.Release()
	return nil
}

func (r *Runtime) start(ctx context.Context, p runtime.StartParams) error {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(r.indexPath(p.ID), []byte(p.Dir), 0o600); err != nil {
		return err
	}
	step := runtime.Steps(p.Trace)
	m, err := r.prepare(ctx, p)
	if err != nil {
		return err
	}
	defer m.close()
	step("disks")
	if err := writeMachineRecord(p.Dir, &m.machineRecord); err != nil {
		return err
	}
	if err := cgroups.Create(r.cgroup(p.ID)); err != nil {
		return err
	}
	if err := cgroups.SetLimits(r.cgroup(p.ID), m.Limits); err != nil {
		return err
	}
	step("cgroup")
	if err := r.boot(ctx, p, m); err != nil {
		return err
	}
	step("boot")
	return nil
}

// boot starts QEMU until a guest reaches its agent, within the deadline,
// at most bootAttempts times.
func (r *Runtime) boot(ctx context.Context, p runtime.StartParams, m *machine) error {
	deadline := bootDeadlineTCG
	if r.cfg.Accel == "kvm" {
		deadline = bootDeadlineKVM
	}
	var err error
	for attempt := 1; attempt <= bootAttempts; attempt++ {
		start := time.Now()
		_ = os.Remove(filepath.Join(p.Dir, logDir, consoleFile))
		if err = r.launch(ctx, p, m); err == nil {
			err = waitReady(ctx, p.Dir, deadline)
		}
		if err == nil {
			m.Info.Boots, m.Info.BootMS = attempt, time.Since(start).Milliseconds()
			r.log.Debug("vm booted", "sandbox", p.ID, "accel", m.Info.Accel, "attempt", attempt, "took", time.Since(start).Round(time.Millisecond))
			return writeInfo(p.Dir, m.Info)
		}
		if ctx.Err() != nil || !errors.Is(err, errBootHung) {
			return err
		}
		r.log.Warn("vm boot hung; booting again", "sandbox", p.ID, "attempt", attempt, "deadline", deadline, "console", consoleTail(p.Dir))
		if kerr := r.killQEMU(ctx, p.Ref); kerr != nil {
			return kerr
		}
	}
	return err
}

var errBootHung = errors.New("the guest did not reach its agent before the boot deadline")

// waitReady waits for the guest's ready line on the console, failing fast
// when QEMU exits, and as hung once QEMU used deadline of CPU time or
// bootWallFactor times it passed on the clock.
func waitReady(ctx context.Context, dir string, deadline time.Duration) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	cpu0 := time.Duration(-1)
	for {
		// The console is on the bounded log mount: at most a few MiB.
		b, _ := os.ReadFile(filepath.Join(dir, logDir, consoleFile))
		if strings.Contains(string(b), vminit.ReadyLine) {
			return nil
		}
		pid, ok := readPid(dir)
		if !ok || !qemuAlive(pid, dir) {
			return fmt.Errorf("qemu exited during boot: %s", consoleTail(dir))
		}
		cpu, err := processCPU(pid)
		if err != nil {
			cpu = time.Since(start) // unreadable: the clock stands in
		}
		if cpu0 < 0 {
			cpu0 = cpu
		}
		if wall := time.Since(start); cpu-cpu0 >= deadline || wall >= bootWallFactor*deadline {
			return fmt.Errorf("%w (%s of CPU time, %s of wall time): %s", errBootHung,
				(cpu - cpu0).Round(time.Millisecond), wall.Round(time.Millisecond), consoleTail(dir))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// processCPU is the CPU time process pid used so far (user and system,
// from /proc/PID/stat, in clock ticks of 10 ms: USER_HZ is 100 on Linux).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command's closing parenthesis: state (3) …
	// utime (14) and stime (15), counted from 1.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("malformed stat times")
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

func writeInfo(dir string, info Info) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, infoFile), b, 0o600)
}

// ReadInfo returns what vm.json records for a sandbox directory.
func ReadInfo(dir string) (Info, error) {
	var info Info
	b, err := os.ReadFile(filepath.Join(dir, infoFile))
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(b, &info)
}

// consoleTail is the last lines of the guest's console, for errors.
func consoleTail(dir string) string {
	s := boundfs.TailLines(consolePath(dir), 8, " | ")
	if s == "" {
		return "(no console output)"
	}
	return "console: " + s
}

// Describe reports the accelerator, machine type, kernel and sizing a
// started sandbox's guest runs with.
func (r *Runtime) Describe(ref runtime.Ref) map[string]string {
	info, err := ReadInfo(ref.Dir)
	if err != nil {
		return nil
	}
	return map[string]string{
		"accel": info.Accel, "machine": info.Machine, "kernel": info.Kernel,
		"vcpus": strconv.Itoa(info.VCPUs), "ram_mb": strconv.FormatInt(info.RAMMB, 10),
		"boot_ms": strconv.FormatInt(info.BootMS, 10), "boots": strconv.Itoa(info.Boots),
	}
}
