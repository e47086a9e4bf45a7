package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

func newUsageCmd() *cobra.Command {
	var (
		since, until time.Duration
		by           string
		asJSON       bool
		asCSV        bool
		sandboxID    string
	)
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show what sandboxes used (CPU-seconds, memory GiB-seconds, network bytes, disk, running and paused time), grouped by sandbox, runtime or tag",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, _ []string) error {
			if asJSON && asCSV {
				return fmt.Errorf("--json and --csv: choose one")
			}
			if since <= 0 {
				return fmt.Errorf("--since %s: must be more than 0", since)
			}
			if sandboxID != "" {
				u, err := c.SandboxUsage(ctx, sandboxID)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(os.Stdout, u)
				}
				return writeUsage(os.Stdout, asCSV, "sandbox", []apiv1.UsageGroup{{Key: u.SandboxID, Sandboxes: 1, Usage: u.Usage}})
			}
			now := time.Now()
			opts := corral.UsageOptions{From: now.Add(-since), GroupBy: by}
			if until > 0 {
				opts.To = now.Add(-until)
			}
			rep, err := c.Usage(ctx, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(os.Stdout, rep)
			}
			return writeUsage(os.Stdout, asCSV, by, rep.Groups)
		}),
	}
	f := cmd.Flags()
	f.DurationVar(&since, "since", 24*time.Hour, "sandboxes that ran in the last DURATION (a sandbox counts in full if it ran at any time in it)")
	f.DurationVar(&until, "until", 0, "up to DURATION ago (default now)")
	f.StringVar(&by, "by", "", "group by sandbox, runtime or tag:KEY (default: one total)")
	f.StringVar(&sandboxID, "sandbox", "", "one sandbox's usage: so far while it lives, settled once it ended")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&asCSV, "csv", false, "print the report as CSV (bytes and seconds, unrounded)")
	return cmd
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeUsage prints groups as a table or as CSV.
func writeUsage(w io.Writer, asCSV bool, by string, groups []apiv1.UsageGroup) error {
	key := by
	if key == "" {
		key = "total"
	}
	if asCSV {
		cw := csv.NewWriter(w)
		cw.Write([]string{key, "sandboxes", "cpu_seconds", "cpu_burst_seconds", "memory_requested_gib_seconds", "memory_used_gib_seconds",
			"memory_peak_bytes", "memory_avg_bytes", "net_in_bytes", "net_out_bytes", "disk_peak_bytes", "disk_quota_bytes", "running_seconds", "paused_seconds"})
		for _, g := range groups {
			u := g.Usage
			cw.Write([]string{g.Key, strconv.Itoa(g.Sandboxes), ftoa(u.CPUSeconds), ftoa(u.CPUBurstSeconds), ftoa(u.MemoryRequestedGiBSeconds),
				ftoa(u.MemoryUsedGiBSeconds), utoa(u.MemoryPeakBytes), utoa(u.MemoryAvgBytes), utoa(u.NetInBytes), utoa(u.NetOutBytes),
				utoa(u.DiskPeakBytes), utoa(u.DiskQuotaBytes), ftoa(u.RunningSeconds), ftoa(u.PausedSeconds)})
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tSANDBOXES\tCPU-S\tBURST-S\tMEM GIB-S (REQ/USED)\tMEM PEAK\tNET IN\tNET OUT\tDISK PEAK\tRUNNING\tPAUSED\n", strings.ToUpper(key))
	for _, g := range groups {
		u, k := g.Usage, g.Key
		if k == "" {
			k = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f/%.1f\t%s\t%s\t%s\t%s\t%s\t%s\n", k, g.Sandboxes, u.CPUSeconds, u.CPUBurstSeconds,
			u.MemoryRequestedGiBSeconds, u.MemoryUsedGiBSeconds, sizeString(int64(u.MemoryPeakBytes)), sizeString(int64(u.NetInBytes)),
			sizeString(int64(u.NetOutBytes)), sizeString(int64(u.DiskPeakBytes)), seconds(u.RunningSeconds), seconds(u.PausedSeconds))
	}
	return tw.Flush()
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
func utoa(u uint64) string  { return strconv.FormatUint(u, 10) }

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}
