package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// runBreakdown times n cold creates (a spec no warm pool holds) step by
// step: the daemon's own phases (the record's create_phases: admission,
// image, network, runtime and the runtime's steps inside it, agent,
// record), what the HTTP round trip adds around them, and the first exec
// to its first output; beside raw runsc's time to interactive in the same
// run.
func runBreakdown(ctx context.Context, c *corral.Client, cfg Config, out io.Writer) error {
	raw, err := newRaw(cfg)
	if err != nil {
		return err
	}
	defer raw.close()
	var (
		order  []string
		phases = map[string]*Result{}
		api    = Result{Name: "api"}
		exec   = Result{Name: "first exec"}
		total  = Result{Name: "total"}
	)
	add := func(name string, d time.Duration) {
		r := phases[name]
		if r == nil {
			r = &Result{Name: name}
			phases[name] = r
			order = append(order, name)
		}
		r.Samples = append(r.Samples, d)
	}
	for i := 0; i < cfg.N; i++ {
		s, err := breakdownOnce(ctx, c)
		if err != nil {
			return err
		}
		var server time.Duration
		for _, p := range s.phases {
			d := time.Duration(p.MS * float64(time.Millisecond))
			add(p.Name, d)
			if !strings.Contains(p.Name, ".") {
				server += d
			}
		}
		api.Samples = append(api.Samples, s.create-server)
		exec.Samples = append(exec.Samples, s.exec)
		total.Samples = append(total.Samples, s.create+s.exec)
	}
	rawTTI, err := raw.tti(ctx, cfg.N)
	if err != nil {
		return fmt.Errorf("raw runsc time to interactive: %w", err)
	}
	fmt.Fprintf(out, "create breakdown: %d cold creates (%d MiB, a spec no warm pool holds), p50 and p95 per step\n", cfg.N, coldMemoryMB)
	for _, name := range order {
		label := name
		if strings.Contains(name, ".") {
			label = "  " + name
		}
		row(out, label, *phases[name])
	}
	row(out, "http+client", api)
	row(out, "first exec", exec)
	fmt.Fprintln(out)
	report(out, "time to interactive (create → first output of echo)", total, rawTTI)
	return nil
}

// breakdownSample is one create's figures.
type breakdownSample struct {
	create, exec time.Duration // as the client saw them
	phases       []apiv1.Phase // as the daemon recorded them
}

func breakdownOnce(ctx context.Context, c *corral.Client) (breakdownSample, error) {
	var s breakdownSample
	t0 := time.Now()
	sb, err := c.Create(ctx, apiv1.CreateSandboxRequest{MemoryMB: coldMemoryMB})
	if err != nil {
		return s, err
	}
	defer c.Terminate(context.WithoutCancel(ctx), sb.ID)
	s.create = time.Since(t0)
	t1 := time.Now()
	if err := firstOutput(ctx, c, sb.ID); err != nil {
		return s, err
	}
	s.exec = time.Since(t1)
	if len(sb.CreatePhases) == 0 {
		return s, fmt.Errorf("sandbox %s has no create_phases (a daemon older than corral bench --breakdown?)", sb.ID)
	}
	s.phases = sb.CreatePhases
	return s, nil
}
