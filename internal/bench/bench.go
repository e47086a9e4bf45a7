// Package bench measures Corral against raw runsc (and vm sandboxes against a
// raw QEMU boot of the same kernel, initramfs and disks), side by side in one run:
// time to interactive (create to the first output of echo), exec round trip,
// and file throughput; and density (how many idle sandboxes one daemon
// holds, each answering an exec, at what host memory each). It drives a running daemon through the Go SDK and
// runsc directly with an equivalent OCI bundle (same root filesystem, same
// private overlay layer, no network, same mounts).
package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// Config of one benchmark run.
type Config struct {
	N         int    // samples per figure
	RunscPath string // for the baseline
	RootFS    string // the base root filesystem, as the daemon uses it
	WorkDir   string // scratch space for raw runsc bundles and state
	FileMiB   int    // size of the throughput file
	Image     string // also measure time to interactive from this image ("" skips)
	Runtime   string // "gvisor" (default) or "vm"
	KernelDir string // the vm runtime's guest kernel (for the raw QEMU baseline)
	Warm      bool   // also measure creates from the daemon's warm pool beside cold ones
	// Template measures only creates from a memory snapshot (a template)
	// beside cold ones, on Runtime.
	Template bool
	// Breakdown measures only cold creates, step by step, beside raw
	// runsc's time to interactive.
	Breakdown bool
	// CLI measures only `corral run -- true` through the CLI beside
	// `runsc do /bin/true`.
	CLI bool
	// Density, when its N is set, measures only how many idle sandboxes
	// the daemon holds at once (density.go).
	Density DensityConfig
}

// Result is one measured figure.
type Result struct {
	Name    string
	Samples []time.Duration
}

// Percentile returns the p-th percentile (nearest rank).
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Samples) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), r.Samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Run measures everything and writes a report to out.
func Run(ctx context.Context, c *corral.Client, cfg Config, out io.Writer) error {
	if cfg.Density.N > 0 {
		return runDensity(ctx, c, cfg, out)
	}
	if cfg.Template {
		if cfg.Runtime == "" {
			cfg.Runtime = "gvisor"
		}
		return runTemplate(ctx, c, cfg, out)
	}
	if cfg.Runtime == "vm" {
		return runVM(ctx, c, cfg, out)
	}
	if cfg.Breakdown {
		return runBreakdown(ctx, c, cfg, out)
	}
	if cfg.CLI {
		return runCLI(ctx, c, cfg, out)
	}
	raw, err := newRaw(cfg)
	if err != nil {
		return err
	}
	defer raw.close()
	fmt.Fprintf(out, "corral bench: n=%d, file=%d MiB, runsc=%s\n\n", cfg.N, cfg.FileMiB, raw.version())
	before, err := c.Version(ctx)
	if err != nil {
		return err
	}
	// Cold creates: a spec no warm pool holds (the default pool's would
	// hand out started sandboxes).
	tti, err := corralTTIOn(ctx, c, cfg.N, apiv1.CreateSandboxRequest{MemoryMB: coldMemoryMB})
	if err != nil {
		return fmt.Errorf("corral time to interactive: %w", err)
	}
	rawTTI, err := raw.tti(ctx, cfg.N)
	if err != nil {
		return fmt.Errorf("raw runsc time to interactive: %w", err)
	}
	execs, err := corralExec(ctx, c, cfg.N)
	if err != nil {
		return fmt.Errorf("corral exec: %w", err)
	}
	rawExecs, err := raw.exec(ctx, cfg.N)
	if err != nil {
		return fmt.Errorf("raw runsc exec: %w", err)
	}
	report(out, fmt.Sprintf("time to interactive, cold (create → first output of echo; %d MiB, a spec no pool holds)", coldMemoryMB), tti, rawTTI)
	if cfg.Image != "" {
		imgTTI, err := corralTTIOn(ctx, c, cfg.N, apiv1.CreateSandboxRequest{Image: cfg.Image, MemoryMB: coldMemoryMB})
		if err != nil {
			return fmt.Errorf("corral time to interactive from %s: %w", cfg.Image, err)
		}
		compare(out, "time to interactive from image "+cfg.Image, "image", imgTTI, "base", tti)
		fmt.Fprintln(out)
	}
	if cfg.Warm || before.WarmPool != nil {
		if err := runWarm(ctx, c, cfg.N, out); err != nil {
			return fmt.Errorf("warm pool: %w", err)
		}
	}
	report(out, "exec round trip (echo in a running sandbox)", execs, rawExecs)
	if err := fileThroughput(ctx, c, cfg.FileMiB, out); err != nil {
		return err
	}
	after, err := c.Version(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\n"+poolLine(before, after))
	return nil
}

// poolLine describes the daemon's warm pools and their hits and misses
// between two readings of /v1/version.
func poolLine(before, after *apiv1.Version) string {
	if after.WarmPool == nil {
		return "warm pool: none (corral serve --warm-pool 0)"
	}
	var hits, misses int64
	if before.WarmPool != nil {
		hits, misses = before.WarmPool.Hits, before.WarmPool.Misses
	}
	return fmt.Sprintf("warm pool: size %d; in this run %d hits, %d misses (since the daemon started: %d, %d)",
		after.WarmPool.Size, after.WarmPool.Hits-hits, after.WarmPool.Misses-misses, after.WarmPool.Hits, after.WarmPool.Misses)
}

func report(out io.Writer, title string, ours, base Result) {
	compare(out, title, "corral", ours, "raw runsc", base)
	fmt.Fprintln(out)
}

// compare prints title, then a and b (p50 and p95) and their ratio a/b.
func compare(out io.Writer, title, aLabel string, a Result, bLabel string, b Result) {
	fmt.Fprintf(out, "%s\n", title)
	row(out, aLabel, a)
	row(out, bLabel, b)
	fmt.Fprintf(out, "  %-12s p50 %8.2fx  p95 %8.2fx\n", "ratio",
		ratio(a.Percentile(50), b.Percentile(50)), ratio(a.Percentile(95), b.Percentile(95)))
}

// row prints one figure's p50 and p95.
func row(out io.Writer, label string, r Result) {
	fmt.Fprintf(out, "  %-12s p50 %9s  p95 %9s\n", label, ms(r.Percentile(50)), ms(r.Percentile(95)))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// corralTTIOn creates n sandboxes of req one after another and times
// each create through the first stdout byte of echo; removal is not timed.
func corralTTIOn(ctx context.Context, c *corral.Client, n int, req apiv1.CreateSandboxRequest) (Result, error) {
	res := Result{Name: "corral tti"}
	for i := 0; i < n; i++ {
		d, err := ttiOnce(ctx, c, req)
		if err != nil {
			return res, err
		}
		res.Samples = append(res.Samples, d)
	}
	return res, nil
}

// ttiOnce times one create through the first output of echo; removal is
// not timed.
func ttiOnce(ctx context.Context, c *corral.Client, req apiv1.CreateSandboxRequest) (time.Duration, error) {
	t0 := time.Now()
	sb, err := c.Create(ctx, req)
	if err != nil {
		return 0, err
	}
	err = firstOutput(ctx, c, sb.ID)
	d := time.Since(t0)
	if _, terr := c.Terminate(ctx, sb.ID); err == nil {
		err = terr
	}
	return d, err
}

// firstOutput runs echo and returns once its first output arrived.
func firstOutput(ctx context.Context, c *corral.Client, id string) error {
	return execUntil(ctx, c, id, []string{"echo", "hi"}, func(ev apiv1.ExecEvent) (bool, error) {
		if ev.Type == apiv1.EventEnd {
			return true, fmt.Errorf("echo ended without output (exit %d)", ev.ExitCode)
		}
		return ev.Type == apiv1.EventStdout, nil
	})
}

// execUntil runs cmd in sandbox id and reads its events until done says
// to stop, returning done's error.
func execUntil(ctx context.Context, c *corral.Client, id string, cmd []string, done func(apiv1.ExecEvent) (bool, error)) error {
	s, err := c.Exec(ctx, id, apiv1.ExecRequest{Cmd: cmd})
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		ev, err := s.Next()
		if err != nil {
			return err
		}
		if stop, err := done(ev); stop {
			return err
		}
	}
}

// corralExec times n full echo round trips in one running sandbox.
func corralExec(ctx context.Context, c *corral.Client, n int) (Result, error) {
	res := Result{Name: "corral exec"}
	sb, err := c.Create(ctx, apiv1.CreateSandboxRequest{})
	if err != nil {
		return res, err
	}
	defer c.Terminate(context.WithoutCancel(ctx), sb.ID)
	for i := 0; i < n+1; i++ {
		t0 := time.Now()
		var out bytes.Buffer
		r, err := c.Run(ctx, sb.ID, apiv1.ExecRequest{Cmd: []string{"echo", "hi"}}, nil, &out, io.Discard)
		if err != nil {
			return res, err
		}
		if r.ExitCode != 0 || strings.TrimSpace(out.String()) != "hi" {
			return res, fmt.Errorf("echo: exit %d, output %q", r.ExitCode, out.String())
		}
		if i > 0 { // the first call warms the connection
			res.Samples = append(res.Samples, time.Since(t0))
		}
	}
	return res, nil
}

// fileThroughput writes and reads back a random file of mib MiB.
func fileThroughput(ctx context.Context, c *corral.Client, mib int, out io.Writer) error {
	sb, err := c.Create(ctx, apiv1.CreateSandboxRequest{MemoryMB: 1024})
	if err != nil {
		return err
	}
	defer c.Terminate(context.WithoutCancel(ctx), sb.ID)
	data := make([]byte, mib<<20)
	if _, err := rand.Read(data); err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := c.WriteFile(ctx, sb.ID, "/root/bench.bin", bytes.NewReader(data), 0o644); err != nil {
		return err
	}
	write := time.Since(t0)
	t0 = time.Now()
	r, size, err := c.ReadFile(ctx, sb.ID, "/root/bench.bin")
	if err != nil {
		return err
	}
	back := bytes.NewBuffer(make([]byte, 0, max(size, 0)))
	_, err = io.Copy(back, r)
	r.Close()
	if err != nil {
		return err
	}
	read := time.Since(t0)
	got := back.Bytes()
	if !bytes.Equal(got, data) {
		return fmt.Errorf("read back %d bytes that differ from the %d written", len(got), len(data))
	}
	fmt.Fprintf(out, "file throughput (%d MiB, byte-identical)\n", mib)
	fmt.Fprintf(out, "  write %8.1f MiB/s (%s)\n", float64(mib)/write.Seconds(), ms(write))
	fmt.Fprintf(out, "  read  %8.1f MiB/s (%s)\n", float64(mib)/read.Seconds(), ms(read))
	return nil
}
