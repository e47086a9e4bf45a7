package vm

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"corral/internal/runtime"
	"corral/internal/vminit"
)

// RawBoot is the baseline `corral bench` sets beside vm sandboxes: the
// same kernel, initramfs and disks booted straight under QEMU (no daemon,
// cgroup, network or agent handshake), timed from QEMU's start to the
// guest's ready line on its serial console. dir is scratch space.
func (r *Runtime) RawBoot(ctx context.Context, rootfs, dir string) (time.Duration, error) {
	p := runtime.StartParams{Ref: runtime.Ref{ID: "raw", Dir: dir}, RootFS: rootfs, Hostname: "raw"}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	m, err := r.prepare(ctx, p)
	if err != nil {
		return 0, err
	}
	defer m.close()
	args, pass, err := r.qemuArgs(p, m)
	if err != nil {
		return 0, err
	}
	defer pass.close()
	args = rawArgs(args)
	ctx, cancel := context.WithTimeout(ctx, bootDeadlineTCG)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.cfg.QEMUPath, args...)
	cmd.ExtraFiles = pass.files
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), vminit.ReadyLine) {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("raw boot: no ready line (%v)", ctx.Err())
}

// rawArgs turns a sandbox's QEMU command line into the baseline's: the
// console on stdout, in the foreground, without pid file or QMP.
func rawArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-daemonize":
			continue
		case "-pidfile", "-qmp":
			i++
			continue
		case "-serial":
			out = append(out, "-serial", "stdio")
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}
