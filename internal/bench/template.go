package bench

import (
	"context"
	"fmt"
	"io"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// runTemplate measures time to interactive of creates from a template (a
// memory snapshot of a booted sandbox whose agent is ready) beside cold
// creates of the same spec, interleaved in one run, then pause and resume
// beside the same cold creates. The template is made and removed here.
func runTemplate(ctx context.Context, c *corral.Client, cfg Config, out io.Writer) (err error) {
	spec := apiv1.CreateSandboxRequest{Runtime: cfg.Runtime, MemoryMB: coldMemoryMB}
	src, err := c.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("template sandbox: %w", err)
	}
	if err := firstOutput(ctx, c, src.ID); err != nil {
		return err
	}
	snap, err := c.SnapshotMemory(ctx, src.ID, "")
	if _, terr := c.Terminate(ctx, src.ID); err == nil {
		err = terr
	}
	if err != nil {
		return fmt.Errorf("template snapshot: %w", err)
	}
	defer func() {
		if _, rerr := c.RemoveSnapshot(context.WithoutCancel(ctx), snap.ID); err == nil {
			err = rerr
		}
	}()
	tmpl := Result{Name: "template"}
	cold := Result{Name: "cold"}
	for i := 0; i < cfg.N; i++ {
		d, err := ttiOnce(ctx, c, apiv1.CreateSandboxRequest{FromSnapshot: snap.ID})
		if err != nil {
			return fmt.Errorf("create from the template: %w", err)
		}
		tmpl.Samples = append(tmpl.Samples, d)
		if d, err = ttiOnce(ctx, c, spec); err != nil {
			return fmt.Errorf("cold create: %w", err)
		}
		cold.Samples = append(cold.Samples, d)
	}
	compare(out, fmt.Sprintf("time to interactive from a template (memory snapshot, %d MiB) vs cold, %s, n=%d, same run",
		snap.SizeBytes>>20, cfg.Runtime, cfg.N), "template", tmpl, "cold", cold)
	fmt.Fprintln(out)
	return pauseResume(ctx, c, cfg.Runtime, cfg.N, cold, out)
}
