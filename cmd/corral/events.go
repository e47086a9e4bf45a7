package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newEventsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "events ID",
		Short: "Print a sandbox's event log",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
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
		},
	}
}
