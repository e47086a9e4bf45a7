package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

func newStatsCmd() *cobra.Command {
	var (
		follow bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "stats [ID...]",
		Short: "Show what sandboxes use now (CPU, memory, disk, measured on the host every few seconds); every running one by default; -f refreshes",
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			for {
				ids := args
				if len(ids) == 0 {
					sbs, err := c.ListAll(ctx, corral.ListOptions{States: []string{"running"}})
					if err != nil {
						return err
					}
					for _, sb := range sbs {
						ids = append(ids, sb.ID)
					}
				}
				interval, err := printStats(ctx, c, ids, asJSON)
				if err != nil || !follow {
					return err
				}
				if interval <= 0 {
					interval = 5
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Duration(interval * float64(time.Second))):
				}
			}
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print again every sampling interval until interrupted")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each sandbox's samples as JSON (all that are kept)")
	return cmd
}

// printStats prints the newest sample of each sandbox (JSON: all its
// samples) and returns the daemon's sampling interval in seconds.
func printStats(ctx context.Context, c *corral.Client, ids []string, asJSON bool) (float64, error) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "ID\tCPU %\tCPUS\tMEMORY\tDISK\tSAMPLED")
	}
	var interval float64
	for _, id := range ids {
		m, err := c.Metrics(ctx, id, time.Time{})
		if err != nil {
			return 0, err
		}
		interval = m.Interval
		if asJSON {
			if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"id": id, "metrics": m}); err != nil {
				return 0, err
			}
			continue
		}
		if len(m.Samples) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tnot yet\n", id)
			continue
		}
		fmt.Fprintln(tw, statsRow(id, m.Samples[len(m.Samples)-1]))
	}
	return interval, tw.Flush()
}

func statsRow(id string, s apiv1.MetricSample) string {
	return fmt.Sprintf("%s\t%.1f\t%g\t%s / %s\t%s / %s\t%s ago", id, s.CPUPercent, s.CPUCount, mib(s.MemoryUsed), mib(s.MemoryTotal),
		mib(s.DiskUsed), mib(s.DiskTotal), time.Since(s.Time).Round(time.Second))
}

// mib formats bytes in MiB.
func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
