package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"corral/internal/cgroups"
	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// Density's sandboxes: idle, 256 MiB, everything else the create
// defaults, except a lifetime long enough that none expires mid-run and
// small requests: admission reserves requests against the host (an idle
// sandbox holds about 20 MiB and no CPU), and the defaults (512 MiB, one
// core) would stop a density run at the daemon's capacity long before its
// N. The CPU limit stays one core.
const (
	densityMemoryLimitMB = 256
	densityMemoryMB      = 32
	densityCPU           = 0.1
	densityCPULimit      = 1
	densityTimeout       = time.Hour
	densityTag           = "bench"
)

// DensityConfig says where the daemon keeps what the leak check and the
// cgroup figure read. The benchmark runs on the daemon's host, as root.
type DensityConfig struct {
	N           int    // sandboxes to hold at once
	Concurrency int    // creates, execs and removals in flight; default 4
	StateDir    string // the daemon's --state-dir (runsc root, sandbox dirs, netns)
	LinkPrefix  string // the daemon's --net-link-prefix
	// CgroupParent is where the gvisor runtime puts each sandbox's cgroup
	// (<CgroupParent>/<id>); default "/corral".
	CgroupParent string
	// Log, when set, gets progress lines while sandboxes are made and
	// removed.
	Log io.Writer
}

// densityRun is one density measurement: the sandboxes it made, in order.
type densityRun struct {
	c   *corral.Client
	cfg Config
	dc  DensityConfig
	ids []string
}

// runDensity creates cfg.Density.N idle sandboxes with bounded
// concurrency, checks that each answers an exec, measures host memory per
// sandbox, removes them all and checks that nothing of them is left.
// Whatever was created is removed, whatever failed.
func runDensity(ctx context.Context, c *corral.Client, cfg Config, out io.Writer) (err error) {
	dc := cfg.Density
	if dc.Concurrency <= 0 {
		dc.Concurrency = 4
	}
	if dc.CgroupParent == "" {
		dc.CgroupParent = "/corral"
	}
	if dc.Log == nil {
		dc.Log = io.Discard
	}
	d := &densityRun{c: c, cfg: cfg, dc: dc}
	before, err := hostUsed()
	if err != nil {
		return err
	}
	linksBefore, err := countLinks(dc.LinkPrefix)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "corral bench --density: n=%d, concurrency %d, memory limit %d MiB, state dir %s\n\n",
		dc.N, dc.Concurrency, densityMemoryLimitMB, dc.StateDir)

	removed := false
	defer func() {
		if !removed {
			_, _ = d.removeAll(context.WithoutCancel(ctx), io.Discard)
		}
	}()
	createErr := d.createAll(ctx, out)
	var execErr error
	if len(d.ids) > 0 {
		execErr = d.execAll(ctx, out)
		d.memory(before, out)
	}
	removed = true
	removeErr := d.removeAllReport(context.WithoutCancel(ctx), out)
	leakErr := d.leakCheck(context.WithoutCancel(ctx), linksBefore, out)
	return errors.Join(createErr, execErr, removeErr, leakErr)
}

// forEach runs fn(i) for i in [0, n) on dc.Concurrency workers. After the
// first failure no new i starts when stopOnError. It returns each i's
// duration (for those that succeeded), the wall time and the errors.
func (d *densityRun) forEach(ctx context.Context, n int, stopOnError bool, what string, fn func(ctx context.Context, i int) error) (Result, time.Duration, []error) {
	var (
		next    atomic.Int64
		stopped atomic.Bool
		mu      sync.Mutex
		res     = Result{Name: what}
		errs    []error
		wg      sync.WaitGroup
	)
	t0 := time.Now()
	for w := 0; w < min(d.dc.Concurrency, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || stopped.Load() || ctx.Err() != nil {
					return
				}
				t := time.Now()
				err := fn(ctx, i)
				el := time.Since(t)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					if stopOnError {
						stopped.Store(true)
					}
				} else {
					res.Samples = append(res.Samples, el)
				}
				done := len(res.Samples) + len(errs)
				mu.Unlock()
				if done%50 == 0 || err != nil {
					fmt.Fprintf(d.dc.Log, "%s: %d/%d done (%s)%s\n", what, done, n, time.Since(t0).Round(time.Millisecond), errSuffix(err))
				}
			}
		}()
	}
	wg.Wait()
	return res, time.Since(t0), errs
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// createAll creates the sandboxes; the first failure stops further
// creates (the limit it hit is the figure), and what was made stays for
// the checks.
func (d *densityRun) createAll(ctx context.Context, out io.Writer) error {
	n := d.dc.N
	ids := make([]string, n)
	req := apiv1.CreateSandboxRequest{
		MemoryLimitMB: densityMemoryLimitMB, MemoryMB: densityMemoryMB, CPU: densityCPU, CPULimit: densityCPULimit,
		Timeout: densityTimeout.Seconds(),
		Tags:    map[string]string{densityTag: "density"},
	}
	res, wall, errs := d.forEach(ctx, n, true, "create", func(ctx context.Context, i int) error {
		sb, err := d.c.Create(ctx, req)
		if err != nil {
			return fmt.Errorf("create %d: %w", i+1, err)
		}
		ids[i] = sb.ID
		return nil
	})
	for _, id := range ids {
		if id != "" {
			d.ids = append(d.ids, id)
		}
	}
	fmt.Fprintf(out, "create (idle sandboxes, memory limit %d MiB, request %d MiB and %g cores, concurrency %d)\n",
		densityMemoryLimitMB, densityMemoryMB, densityCPU, d.dc.Concurrency)
	fmt.Fprintf(out, "  %-12s %d/%d in %.1fs, %.2f sandboxes/s\n", "created", len(d.ids), n, wall.Seconds(), rate(len(d.ids), wall))
	row(out, "latency", res)
	return firstErrors("creating", errs, out)
}

// execAll runs echo in every sandbox and checks each answers with its own
// id.
func (d *densityRun) execAll(ctx context.Context, out io.Writer) error {
	res, wall, errs := d.forEach(ctx, len(d.ids), false, "exec", func(ctx context.Context, i int) error {
		id := d.ids[i]
		var stdout bytes.Buffer
		r, err := d.c.Run(ctx, id, apiv1.ExecRequest{Cmd: []string{"echo", id}}, nil, &stdout, io.Discard)
		if err != nil {
			return fmt.Errorf("exec in %s: %w", id, err)
		}
		if r.ExitCode != 0 || strings.TrimSpace(stdout.String()) != id {
			return fmt.Errorf("exec in %s: exit %d, output %q", id, r.ExitCode, stdout.String())
		}
		return nil
	})
	fmt.Fprintf(out, "exec check (echo in every sandbox, all %d held)\n", len(d.ids))
	fmt.Fprintf(out, "  %-12s %d/%d in %.1fs\n", "answered", len(res.Samples), len(d.ids), wall.Seconds())
	row(out, "latency", res)
	return firstErrors("exec check", errs, out)
}

// memory prints the host's used memory growth and the sandboxes' cgroup
// usage, each per sandbox.
func (d *densityRun) memory(before uint64, out io.Writer) {
	n := uint64(len(d.ids))
	fmt.Fprintf(out, "host memory per sandbox (%d held)\n", n)
	if after, err := hostUsed(); err != nil {
		fmt.Fprintf(out, "  %-12s %v\n", "host used", err)
	} else {
		grew := int64(after) - int64(before)
		fmt.Fprintf(out, "  %-12s %s a sandbox (MemTotal-MemAvailable %s before, %s after)\n",
			"host used", mib(grew/int64(n)), mib(int64(before)), mib(int64(after)))
	}
	var sum uint64
	read := 0
	var firstErr error
	for _, id := range d.ids {
		u, err := cgroups.ReadUsage(d.dc.CgroupParent + "/" + id)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		sum += u.MemoryBytes
		read++
	}
	if read == 0 {
		fmt.Fprintf(out, "  %-12s unreadable: %v\n", "cgroups", firstErr)
		return
	}
	fmt.Fprintf(out, "  %-12s %s a sandbox (sum of %s/<id> memory usage, page cache included: %s over %d)\n",
		"cgroups", mib(int64(sum/uint64(read))), d.dc.CgroupParent, mib(int64(sum)), read)
}

// removeAll terminates every sandbox made and returns the figures.
func (d *densityRun) removeAll(ctx context.Context, log io.Writer) (Result, error) {
	res, wall, errs := d.forEach(ctx, len(d.ids), false, "remove", func(ctx context.Context, i int) error {
		if _, err := d.c.Terminate(ctx, d.ids[i]); err != nil && !corral.NotFound(err) {
			return fmt.Errorf("remove %s: %w", d.ids[i], err)
		}
		return nil
	})
	res.Name = fmt.Sprintf("%d/%d in %.1fs, %.2f sandboxes/s", len(res.Samples), len(d.ids), wall.Seconds(), rate(len(res.Samples), wall))
	return res, firstErrors("removing", errs, log)
}

func (d *densityRun) removeAllReport(ctx context.Context, out io.Writer) error {
	var buf bytes.Buffer
	res, err := d.removeAll(ctx, &buf)
	fmt.Fprintf(out, "remove (concurrency %d)\n", d.dc.Concurrency)
	fmt.Fprintf(out, "  %-12s %s\n", "removed", res.Name)
	row(out, "latency", res)
	_, _ = io.Copy(out, &buf)
	return err
}

// firstErrors prints how many of errs there were and the first few, and
// returns them joined.
func firstErrors(what string, errs []error, out io.Writer) error {
	if len(errs) == 0 {
		return nil
	}
	fmt.Fprintf(out, "  %-12s %d\n", "failed", len(errs))
	for i, err := range errs {
		if i == 3 {
			fmt.Fprintf(out, "    ... and %d more\n", len(errs)-3)
			break
		}
		fmt.Fprintf(out, "    %v\n", err)
	}
	return fmt.Errorf("%s: %d failed, first: %w", what, len(errs), errs[0])
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
