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
	return &cobra.Command{
		Use:   "events ID",
		Short: "Print a sandbox's event log",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			evs, err := c.Events(ctx, args[0])
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
}
