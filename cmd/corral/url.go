package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newURLCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "url ID PORT",
		Short: "Print the URL of an exposed port (with its token unless public)",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			port, err := strconv.Atoi(args[1])
			if err != nil {
				return fmt.Errorf("port %q: %w", args[1], err)
			}
			u, err := c.PortURL(ctx, args[0], port)
			if err != nil {
				return err
			}
			fmt.Println(u)
			return nil
		}),
	}
}
