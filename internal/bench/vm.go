package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"corral/internal/runtime/vm"
	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// runVM measures vm sandboxes' time to interactive beside a raw QEMU boot
// of the same kernel, initramfs and disks to the guest's ready line.
func runVM(ctx context.Context, c *corral.Client, cfg Config, out io.Writer) error {
	agent, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(cfg.WorkDir, "corral-bench-vm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	r, err := vm.New(vm.Config{KernelDir: cfg.KernelDir, StateDir: filepath.Join(work, "state"), AgentBinary: agent,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "corral bench --runtime vm: n=%d, accel=%s, kernel=%s\n\n", cfg.N, r.Accel(), r.KernelRelease())
	// One boot each, untimed, builds the caches (disk images, initramfs).
	if _, err := r.RawBoot(ctx, cfg.RootFS, filepath.Join(work, "warm")); err != nil {
		return fmt.Errorf("raw qemu boot: %w", err)
	}
	if _, err := corralTTIOn(ctx, c, 1, apiv1.CreateSandboxRequest{Runtime: "vm"}); err != nil {
		return fmt.Errorf("corral vm create: %w", err)
	}
	ours, err := corralTTIOn(ctx, c, cfg.N, apiv1.CreateSandboxRequest{Runtime: "vm"})
	if err != nil {
		return fmt.Errorf("corral vm time to interactive: %w", err)
	}
	raw := Result{Name: "raw qemu"}
	for i := range cfg.N {
		d, err := r.RawBoot(ctx, cfg.RootFS, filepath.Join(work, fmt.Sprintf("raw-%d", i)))
		if err != nil {
			return fmt.Errorf("raw qemu boot: %w", err)
		}
		raw.Samples = append(raw.Samples, d)
	}
	compare(out, "vm time to interactive (create → first output of echo) vs raw QEMU boot to the guest's ready line",
		"corral vm", ours, "raw qemu", raw)
	fmt.Fprintln(out)
	return pauseResume(ctx, c, "vm", cfg.N, ours, out)
}

// pauseResume pauses and resumes one sandbox of runtime rt n times, timing
// the pause and resume → first output of echo, beside the cold creates
// measured before.
func pauseResume(ctx context.Context, c *corral.Client, rt string, n int, cold Result, out io.Writer) error {
	sb, err := c.Create(ctx, apiv1.CreateSandboxRequest{Runtime: rt})
	if err != nil {
		return err
	}
	defer c.Terminate(context.WithoutCancel(ctx), sb.ID)
	if err := firstOutput(ctx, c, sb.ID); err != nil {
		return err
	}
	pauses := Result{Name: "pause"}
	restores := Result{Name: "restore"}
	for range n {
		t0 := time.Now()
		if _, err := c.Pause(ctx, sb.ID); err != nil {
			return fmt.Errorf("pause: %w", err)
		}
		pauses.Samples = append(pauses.Samples, time.Since(t0))
		t0 = time.Now()
		if _, err := c.Resume(ctx, sb.ID); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if err := firstOutput(ctx, c, sb.ID); err != nil {
			return err
		}
		restores.Samples = append(restores.Samples, time.Since(t0))
	}
	compare(out, rt+" restore (resume → first output of echo) vs cold boot (create → first output), same run",
		"restore", restores, "cold boot", cold)
	row(out, "pause", pauses)
	fmt.Fprintln(out)
	return pauseFilesystem(ctx, c, rt, sb.ID, n, restores, cold, out)
}

// pauseFilesystem pauses sandbox id filesystem-only and resumes it n
// times, each round after the sandbox wrote 10 MB of new data, timing the
// pause and the reboot (resume → first output of echo), beside the same
// run's memory restores and cold creates.
func pauseFilesystem(ctx context.Context, c *corral.Client, rt, id string, n int, restores, cold Result, out io.Writer) error {
	pauses := Result{Name: "fs pause"}
	reboots := Result{Name: "reboot"}
	for range n {
		if err := sh(ctx, c, id, "head -c 10000000 /dev/urandom > /root/bench-blob"); err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := c.PauseFilesystem(ctx, id); err != nil {
			return fmt.Errorf("filesystem-only pause: %w", err)
		}
		pauses.Samples = append(pauses.Samples, time.Since(t0))
		t0 = time.Now()
		if _, err := c.Resume(ctx, id); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if err := firstOutput(ctx, c, id); err != nil {
			return err
		}
		reboots.Samples = append(reboots.Samples, time.Since(t0))
	}
	compare(out, rt+" reboot after a filesystem-only pause (resume → first output of echo; 10 MB written each round) vs restore after a memory pause, same run",
		"reboot", reboots, "restore", restores)
	row(out, "cold boot", cold)
	row(out, "fs pause", pauses)
	return nil
}

// sh runs script in sandbox id and waits for it to succeed.
func sh(ctx context.Context, c *corral.Client, id, script string) error {
	return execUntil(ctx, c, id, []string{"sh", "-c", script}, func(ev apiv1.ExecEvent) (bool, error) {
		if ev.Type == apiv1.EventEnd && ev.ExitCode != 0 {
			return true, fmt.Errorf("%q: exit %d", script, ev.ExitCode)
		}
		return ev.Type == apiv1.EventEnd, nil
	})
}
