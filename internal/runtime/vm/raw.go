package vm

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"corral/internal/runtime"
	"corral/internal/vminit"
)

// RawBoot is the baseline `corral bench` sets beside vm sandboxes: the
// same kernel, initramfs, disks and QEMU command line booted straight
// under QEMU (no daemon, cgroup, network, uid or agent handshake), timed
// from QEMU's start to the guest's ready line on its serial console,
// which goes to a pipe. dir is scratch space.
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
	io, out, err := r.rawIO(dir, m)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	args, pass, err := r.qemuArgs(p, m, io)
	if err != nil {
		io.close()
		return 0, err
	}
	defer pass.close()
	ctx, cancel := context.WithTimeout(ctx, bootDeadlineTCG)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.cfg.QEMUPath, args...)
	cmd.ExtraFiles = pass.files
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pass.close()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), vminit.ReadyLine) {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("raw boot: no ready line (%v)", ctx.Err())
}

// rawIO is a sandbox's QEMU descriptors with the console on a pipe, whose
// read end it returns.
func (r *Runtime) rawIO(dir string, m *machine) (*qemuIO, *os.File, error) {
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	io := &qemuIO{console: wr}
	for _, f := range []struct {
		dst  **os.File
		open func() (*os.File, error)
	}{
		{&io.agent, func() (*os.File, error) { return listenUnix(filepath.Join(dir, agentSock)) }},
		{&io.qmp, func() (*os.File, error) { return listenUnix(filepath.Join(dir, qmpSock)) }},
		{&io.kernel, func() (*os.File, error) { return os.Open(r.kernel.vmlinuz()) }},
		{&io.initrd, func() (*os.File, error) { return os.Open(m.Initramfs) }},
	} {
		if *f.dst, err = f.open(); err != nil {
			io.close()
			rd.Close()
			return nil, nil, err
		}
	}
	return io, rd, nil
}
