package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newLsCmd() *cobra.Command {
	var (
		asJSON bool
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List sandboxes (live ones; --all for every record)",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			sbs, err := c.List(ctx, "")
			if err != nil {
				return err
			}
			if !all {
				live := sbs[:0]
				for _, sb := range sbs {
					if sb.State != "terminated" && sb.State != "failed" {
						live = append(live, sb)
					}
				}
				sbs = live
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(sbs)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tSTATE\tRUNTIME\tCREATED\tEND")
			for _, sb := range sbs {
				end := sb.EndReason
				if sb.ExitCode != nil {
					end = fmt.Sprintf("%s (%d)", sb.EndReason, *sb.ExitCode)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", sb.ID, sb.Name, sb.State, sb.Runtime,
					sb.CreatedAt.Local().Format(time.DateTime), end)
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include terminated and failed sandboxes")
	return cmd
}
