package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newPsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ps ID",
		Short: "List the running processes started in a sandbox",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			ps, err := c.Processes(ctx, args[0])
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PID\tTAG\tSTARTED\tCOMMAND")
			for _, p := range ps {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", p.PID, p.Tag, p.StartedAt.Local().Format(time.TimeOnly), strings.Join(p.Cmd, " "))
			}
			return tw.Flush()
		}),
	}
}
