package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// coldMemoryMB is a memory size the warm pool does not hold (it holds the
// default spec), so creates with it start cold.
const coldMemoryMB = 513

// runWarm measures time to interactive from the daemon's warm pool beside
// cold creates of an equivalent spec the pool does not hold, in one run.
// Before each warm sample it waits (untimed) until the pool is full again.
func runWarm(ctx context.Context, c *corral.Client, n int, out io.Writer) error {
	v, err := c.Version(ctx)
	if err != nil {
		return err
	}
	if v.WarmPool == nil || v.WarmPool.Size == 0 {
		return errors.New("the daemon has no warm pool (corral serve --warm-pool N)")
	}
	warm := Result{Name: "warm"}
	cold := Result{Name: "cold"}
	for i := 0; i < n; i++ {
		if err := waitPoolFull(ctx, c); err != nil {
			return err
		}
		d, err := ttiOnce(ctx, c, apiv1.CreateSandboxRequest{})
		if err != nil {
			return fmt.Errorf("warm create: %w", err)
		}
		warm.Samples = append(warm.Samples, d)
		if d, err = ttiOnce(ctx, c, apiv1.CreateSandboxRequest{MemoryMB: coldMemoryMB}); err != nil {
			return fmt.Errorf("cold create: %w", err)
		}
		cold.Samples = append(cold.Samples, d)
	}
	compare(out, fmt.Sprintf("time to interactive from the warm pool (size %d) vs cold, same run", v.WarmPool.Size),
		"warm pool", warm, "cold", cold)
	fmt.Fprintln(out)
	return nil
}

func waitPoolFull(ctx context.Context, c *corral.Client) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		v, err := c.Version(ctx)
		if err != nil {
			return err
		}
		if v.WarmPool != nil && v.WarmPool.Ready >= v.WarmPool.Size {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("the warm pool did not refill within a minute")
}
