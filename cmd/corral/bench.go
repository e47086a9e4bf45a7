package main

import (
	"context"
	"os"

	"corral/internal/bench"
	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	cfg := bench.Config{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running daemon against raw runsc (or, with --runtime vm, raw QEMU), side by side (needs root for the baseline)",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			cfg.Density.Log = os.Stderr
			return bench.Run(ctx, c, cfg, os.Stdout)
		}),
	}
	f := cmd.Flags()
	f.IntVarP(&cfg.N, "n", "n", 20, "samples per figure")
	f.StringVar(&cfg.RunscPath, "runsc", "/var/lib/corral/bin/runsc", "runsc for the baseline")
	f.StringVar(&cfg.RootFS, "rootfs", "/var/lib/corral/rootfs/debian-bookworm", "root filesystem for the baseline (the daemon's base)")
	f.StringVar(&cfg.WorkDir, "work-dir", "", "scratch directory for the baseline (default: the system temp dir)")
	f.IntVar(&cfg.FileMiB, "file-mib", 64, "size of the throughput file in MiB")
	f.StringVar(&cfg.Image, "image", "", "also measure time to interactive from this image, beside the base")
	f.BoolVar(&cfg.Warm, "warm", false, "also measure creates from the daemon's warm pool beside cold ones (corral serve --warm-pool N)")
	f.BoolVar(&cfg.Template, "template", false, "measure only creates from a template (a memory snapshot of a ready sandbox) beside cold creates, on --runtime")
	f.BoolVar(&cfg.Breakdown, "breakdown", false, "measure only cold creates step by step (the daemon's phases, HTTP, first exec) beside raw runsc")
	f.BoolVar(&cfg.CLI, "cli", false, "measure only `corral run -- true` through the CLI (from the warm pool when the daemon has one) beside runsc do /bin/true")
	f.StringVar(&cfg.Runtime, "runtime", "gvisor", "gvisor (against raw runsc) or vm (against a raw QEMU boot)")
	f.IntVar(&cfg.Density.N, "density", 0, "measure only density: hold this many idle sandboxes (--memory-limit 256) at once, exec in each, host memory per sandbox, remove them, check for leftovers (run on the daemon's host)")
	f.IntVar(&cfg.Density.Concurrency, "concurrency", 4, "with --density: creates, execs and removals in flight")
	f.StringVar(&cfg.Density.StateDir, "state-dir", "/var/lib/corral", "with --density: the daemon's --state-dir (runsc root, sandbox dirs) for the leak check")
	f.StringVar(&cfg.Density.LinkPrefix, "net-link-prefix", "crl", "with --density: the daemon's --net-link-prefix for the leak check")
	f.StringVar(&cfg.Density.CgroupParent, "cgroup-parent", "/corral", "with --density: the gvisor runtime's cgroup parent (memory usage, leak check)")
	f.StringVar(&cfg.KernelDir, "vm-kernel", "/var/lib/corral/vm/kernel/current", "guest kernel for the raw QEMU baseline")
	return cmd
}
