package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"corral/sdk/go/corral"
)

// runCLI times what a user types, `corral run -- true` (this very binary,
// against the daemon the client names, so from its warm pool when it has
// one), beside `runsc --network=none do /bin/true`, interleaved in one
// run, and reports the pool's hits and misses over the run.
func runCLI(ctx context.Context, c *corral.Client, cfg Config, out io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(cfg.WorkDir, "corral-bench-cli-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	before, err := c.Version(ctx)
	if err != nil {
		return err
	}
	ours := Result{Name: "corral run"}
	raw := Result{Name: "runsc do"}
	env := []string{"CORRAL_URL=" + c.BaseURL, "CORRAL_TOKEN=" + c.Token}
	for i := 0; i < cfg.N+1; i++ {
		if before.WarmPool != nil {
			if err := waitPoolFull(ctx, c); err != nil {
				return err
			}
		}
		d, err := timeCommand(ctx, env, self, "run", "--no-stdin", "--", "true")
		if err != nil {
			return fmt.Errorf("corral run -- true: %w", err)
		}
		rd, err := timeCommand(ctx, nil, cfg.RunscPath, "--root", work, "--network=none", "do", "/bin/true")
		if err != nil {
			return fmt.Errorf("runsc do /bin/true: %w", err)
		}
		if i > 0 { // the first of each warms the page cache
			ours.Samples = append(ours.Samples, d)
			raw.Samples = append(raw.Samples, rd)
		}
	}
	after, err := c.Version(ctx)
	if err != nil {
		return err
	}
	compare(out, fmt.Sprintf("corral run -- true (through the CLI) vs runsc --network=none do /bin/true, n=%d, same run", cfg.N),
		"corral run", ours, "runsc do", raw)
	fmt.Fprintln(out, poolLine(before, after))
	return nil
}

// timeCommand runs name with args and env added, stdin and output
// discarded, and times it; a non-zero exit is an error.
func timeCommand(ctx context.Context, env []string, name string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	return d, nil
}
