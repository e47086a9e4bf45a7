package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newLsCmd() *cobra.Command {
	var (
		asJSON bool
		all    bool
		states []string
		tags   []string
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List sandboxes (live ones; --all for every record; --state and --tag filter)",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			o := corral.ListOptions{States: states, Tags: map[string]string{}}
			if !all && len(states) == 0 {
				o.States = []string{"creating", "running", "paused", "terminating"}
			}
			for _, t := range tags {
				k, v, _ := strings.Cut(t, "=")
				o.Tags[k] = v
			}
			sbs, err := c.ListAll(ctx, o)
			if err != nil {
				return err
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
	cmd.Flags().StringSliceVar(&states, "state", nil, "only sandboxes in these states (repeat or comma-separate; replaces the live-only default)")
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "only sandboxes with this tag: k=v, or k for any value (repeat: all must match)")
	return cmd
}
