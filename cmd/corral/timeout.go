package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newTimeoutCmd() *cobra.Command {
	var extendOnly bool
	cmd := &cobra.Command{
		Use:   "timeout ID DURATION",
		Short: "End a running or paused sandbox's lifetime DURATION from now (e.g. 10m; 0 ends it now), shortening or extending it; prints the new end",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			d, err := time.ParseDuration(args[1])
			if err != nil {
				return fmt.Errorf("duration %q: %w (e.g. 90s, 10m, 2h)", args[1], err)
			}
			sb, err := c.SetTimeout(ctx, args[0], d, extendOnly)
			if err != nil {
				return err
			}
			if sb.ExpiresAt != nil {
				fmt.Println(sb.ExpiresAt.Local().Format(time.RFC3339))
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&extendOnly, "extend-only", false, "never move the end earlier than it is")
	return cmd
}
