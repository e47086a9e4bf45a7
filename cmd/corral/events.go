package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newEventsCmd() *cobra.Command {
	var after int64
	var limit int
	cmd := &cobra.Command{
		Use:   "events ID",
		Short: "Print a sandbox's event log (all of it, page after page, unless --limit)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			if limit < 0 || after < 0 {
				return fmt.Errorf("--limit and --after take a number of at least 0")
			}
			evs, err := c.EventsAfter(ctx, args[0], after, limit)
			if err != nil {
				return err
			}
			for _, e := range evs {
				var kv []string
				for k, v := range e.Fields {
					kv = append(kv, k+"="+v)
				}
				sort.Strings(kv)
				fmt.Fprintf(os.Stdout, "%s  %-18s %s %s\n", e.Time.Local().Format(time.RFC3339), e.Kind, e.Message, strings.Join(kv, " "))
			}
			return nil
		}),
	}
	cmd.Flags().Int64Var(&after, "after", 0, "only the events after this sequence number")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many events (0: all)")
	return cmd
}
